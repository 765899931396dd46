// wasm-deployer JS guest helper: the parts shared by deployer plugins (wasm-deployer.js) and
// hook plugins (hooks.js). It imports only `log` and `clock`, which both worlds have.
//
// Everything here works on plain JS values; the conversion to the WIT records that
// componentize-js expects (every record field present, enums as lowercase strings, u64 as
// BigInt) lives in the `*ToWit` functions, which never let a bad value reach the generated
// bindings (a bad value there is a trap, not an error).

import { log as witLog } from 'wasm-deployer:plugin/log@1.5.0';
import {
  nowUnixMillis as witNowUnixMillis,
  nowRfc3339 as witNowRfc3339,
  monotonicNanos as witMonotonicNanos,
} from 'wasm-deployer:plugin/clock@1.5.0';

/** The WIT package version this helper speaks (`wasm-deployer:plugin@…`). */
export const WIT_VERSION = '1.5.0';

// ---- Landscaper error codes ------------------------------------------------------------------

export const ERR_UNAUTHORIZED = 'ERR_UNAUTHORIZED';
export const ERR_CONFIGURATION_PROBLEM = 'ERR_CONFIGURATION_PROBLEM';
export const ERR_INTERNAL_PROBLEM = 'ERR_INTERNAL_PROBLEM';
export const ERR_TIMEOUT = 'ERR_TIMEOUT';
export const ERR_CYCLIC_DEPENDENCIES = 'ERR_CYCLIC_DEPENDENCIES';
export const ERR_CLEANUP = 'ERR_CLEANUP';
export const ERR_WEBHOOK = 'ERR_WEBHOOK';
export const ERR_UNFINISHED = 'ERR_UNFINISHED';
export const ERR_FOR_INFO_ONLY = 'ERR_FOR_INFO_ONLY';
export const ERR_NO_RETRY = 'ERR_NO_RETRY';

/** The same codes as an object: `codes.CONFIGURATION_PROBLEM === 'ERR_CONFIGURATION_PROBLEM'`. */
export const codes = Object.freeze({
  UNAUTHORIZED: ERR_UNAUTHORIZED,
  CONFIGURATION_PROBLEM: ERR_CONFIGURATION_PROBLEM,
  INTERNAL_PROBLEM: ERR_INTERNAL_PROBLEM,
  TIMEOUT: ERR_TIMEOUT,
  CYCLIC_DEPENDENCIES: ERR_CYCLIC_DEPENDENCIES,
  CLEANUP: ERR_CLEANUP,
  WEBHOOK: ERR_WEBHOOK,
  UNFINISHED: ERR_UNFINISHED,
  FOR_INFO_ONLY: ERR_FOR_INFO_ONLY,
  NO_RETRY: ERR_NO_RETRY,
});

/** DeployItem phases (`status.phase`). */
export const Phase = Object.freeze({
  Init: 'Init',
  Progressing: 'Progressing',
  Succeeded: 'Succeeded',
  Failed: 'Failed',
  InitDelete: 'InitDelete',
  Deleting: 'Deleting',
  DeleteFailed: 'DeleteFailed',
});

const MAX_MESSAGE = 4000; // keep status.lastError.message readable

// ---- errors ----------------------------------------------------------------------------------

/**
 * A failed step (WIT `deployer-error`), mapped by the host onto `status.lastError`.
 *
 * `throw new DeployerError(message, { codes, reason, operation, conditions })` from
 * reconcile/delete/run. Codes ERR_CONFIGURATION_PROBLEM, ERR_INTERNAL_PROBLEM, ERR_TIMEOUT,
 * ERR_UNAUTHORIZED and ERR_CYCLIC_DEPENDENCIES fail the item; an error without them is
 * retried. An empty `operation` is filled with the exported function ("reconcile", "delete",
 * or the hook type).
 */
export class DeployerError extends Error {
  static defaultCodes = [];
  static defaultReason = 'Error';

  constructor(message, { codes, reason, operation, conditions } = {}) {
    super(String(message ?? ''));
    this.name = new.target.name;
    this.codes = [...(codes ?? new.target.defaultCodes)].map(String);
    this.reason = String(reason || new.target.defaultReason);
    this.operation = String(operation ?? '');
    this.conditions = [...(conditions ?? [])];
  }

  hasCode(code) {
    return this.codes.includes(code);
  }

  toString() {
    const s = `${this.reason}: ${this.message}`;
    return this.codes.length ? `${s} [${this.codes.join(', ')}]` : s;
  }
}

/** ERR_CONFIGURATION_PROBLEM: the DeployItem (its provider configuration) is wrong; the item fails. */
export class ConfigurationError extends DeployerError {
  static defaultCodes = [ERR_CONFIGURATION_PROBLEM];
  static defaultReason = 'ConfigurationInvalid';
}

/** ERR_INTERNAL_PROBLEM: a bug or an unexpected state; the item fails. */
export class InternalError extends DeployerError {
  static defaultCodes = [ERR_INTERNAL_PROBLEM];
  static defaultReason = 'InternalProblem';
}

/** ERR_TIMEOUT: something timed out; the item fails. */
export class TimeoutError extends DeployerError {
  static defaultCodes = [ERR_TIMEOUT];
  static defaultReason = 'Timeout';
}

/** ERR_UNAUTHORIZED: missing permissions; the item fails. */
export class UnauthorizedError extends DeployerError {
  static defaultCodes = [ERR_UNAUTHORIZED];
  static defaultReason = 'Unauthorized';
}

/** No code: the step is retried (until the item's progressing timeout). */
export class RetryableError extends DeployerError {
  static defaultCodes = [];
  static defaultReason = 'Retry';
}

// ---- conditions ------------------------------------------------------------------------------

const CONDITION_STATUS = { true: 'true', false: 'false', unknown: 'unknown', progressing: 'progressing' };

/**
 * A condition to report (WIT `condition-report`); `status` is "True", "False", "Unknown",
 * "Progressing" (any case) or a boolean. The host owns the timestamps.
 */
export function condition(type, status, reason = '', message = '', codes = []) {
  return { type, status, reason, message, codes };
}

export function conditionToWit(c) {
  if (c === null || typeof c !== 'object') {
    throw new TypeError(`a condition must be an object, got ${jsonType(c)}`);
  }
  const raw = c.status;
  const status = typeof raw === 'boolean' ? String(raw) : CONDITION_STATUS[String(raw).toLowerCase()];
  if (status === undefined) {
    throw new TypeError(
      `condition ${JSON.stringify(c.type)}: status must be True, False, Unknown or Progressing, not ${JSON.stringify(raw)}`,
    );
  }
  return {
    type: String(c.type ?? ''),
    status,
    reason: String(c.reason ?? ''),
    message: String(c.message ?? ''),
    codes: listOf(c.codes, 'condition codes').map(String),
  };
}

// ---- conversions -----------------------------------------------------------------------------

export function jsonType(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

export function listOf(v, what) {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new TypeError(`${what} must be an array, got ${jsonType(v)}`);
  return v;
}

/** An object as JSON text for the WIT `option<string>` fields: strings are taken as JSON text already. */
export function toJsonText(value, what) {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') {
    try {
      JSON.parse(value);
    } catch (e) {
      throw new TypeError(`${what}: a string is taken as JSON text, but it is not JSON (${e.message}); pass an object`);
    }
    return value;
  }
  let s;
  try {
    s = JSON.stringify(value, (_k, v) => (typeof v === 'bigint' ? Number(v) : v));
  } catch (e) {
    throw new TypeError(`${what} is not JSON-serialisable: ${e.message}`);
  }
  if (s === undefined) throw new TypeError(`${what} is not JSON-serialisable (${typeof value})`);
  return s;
}

/** Parse a JSON string the host sent; `undefined` stays `undefined`. */
export function parseHostJson(s, what) {
  if (s === undefined || s === null) return undefined;
  try {
    return JSON.parse(s);
  } catch (e) {
    throw new InternalError(`host sent invalid JSON for ${what}: ${e.message}`, { reason: 'InvalidHostInput' });
  }
}

/** A number or BigInt as the BigInt a WIT u64 needs; undefined/null stay undefined. */
export function toU64(v, what) {
  if (v === undefined || v === null) return undefined;
  let b;
  if (typeof v === 'bigint') b = v;
  else if (typeof v === 'number' && Number.isFinite(v)) b = BigInt(Math.round(v));
  else throw new TypeError(`${what} must be a number or BigInt, got ${jsonType(v)}`);
  if (b < 0n || b > 0xffffffffffffffffn) throw new RangeError(`${what} must be between 0 and 2^64-1, got ${b}`);
  return b;
}

function errorText(e) {
  if (e instanceof Error) {
    const msg = e.message ? `${e.name || 'Error'}: ${e.message}` : e.name || 'Error';
    // StarlingMonkey stacks look like `fn@file.js:12:9`; the first frame is where it was thrown.
    const frame = typeof e.stack === 'string' ? e.stack.split('\n').find((l) => l.trim()) : undefined;
    return frame ? `${msg} (at ${frame.trim()})` : msg;
  }
  if (typeof e === 'string') return e;
  try {
    const s = JSON.stringify(e, (_k, v) => (typeof v === 'bigint' ? String(v) : v));
    if (s !== undefined) return `thrown value ${s}`;
  } catch (_) {
    /* fall through */
  }
  try {
    return `thrown value ${String(e)}`;
  } catch (_) {
    return 'thrown value (not printable)';
  }
}

/** A WIT `deployer-error` record (an error an import returned, or one thrown as a record). */
function looksLikeWitError(v) {
  return v !== null && typeof v === 'object' && !(v instanceof Error) && Array.isArray(v.codes) &&
    typeof v.message === 'string';
}

/** The `DeployerError` for a `deployer-error` record (e.g. the payload of a failed import call). */
export function errorFromWit(r) {
  return new DeployerError(r.message, {
    codes: r.codes,
    reason: r.reason,
    operation: r.operation,
    conditions: listOf(r.conditions, 'conditions').map((c) => ({ ...c })),
  });
}

/**
 * Anything thrown -> a WIT `deployer-error` record with every field present. A
 * `DeployerError` keeps its codes; anything else (Error, string, any value) becomes
 * ERR_INTERNAL_PROBLEM, reason UncaughtException, with the exception text in the message.
 */
export function errorToWit(e, operation) {
  try {
    let err = e;
    if (!(err instanceof DeployerError)) {
      // A componentize-js ComponentError (an import's err) carries the record as `payload`.
      const payload = err !== null && typeof err === 'object' && Object.prototype.hasOwnProperty.call(err, 'payload')
        ? err.payload : err;
      if (looksLikeWitError(payload)) {
        err = errorFromWit(payload);
      } else {
        err = uncaught(e, operation);
      }
    }
    const message = String(err.message ?? '');
    return {
      codes: listOf(err.codes, 'codes').map(String),
      operation: String(err.operation || operation),
      reason: String(err.reason || 'Error'),
      message: message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE)}…` : message,
      conditions: listOf(err.conditions, 'conditions').map(conditionToWit),
    };
  } catch (inner) {
    // e.g. a condition with a bad status: still an error record, never a trap.
    return {
      codes: [ERR_INTERNAL_PROBLEM],
      operation: String(operation),
      reason: 'UncaughtException',
      message: `${safeText(e)} (and converting it failed: ${safeText(inner)})`.slice(0, MAX_MESSAGE),
      conditions: [],
    };
  }
}

function safeText(e) {
  try {
    return errorText(e);
  } catch (_) {
    return 'unprintable exception';
  }
}

function uncaught(e, operation) {
  const text = safeText(e);
  try {
    const stack = e instanceof Error && typeof e.stack === 'string' && e.stack ? `\n${e.stack}` : '';
    logAt('error', `uncaught exception in ${operation}: ${text}${stack}`);
  } catch (_) {
    /* logging must not turn an error into a trap */
  }
  return new InternalError(text, { reason: 'UncaughtException', operation });
}

/** `{tag: 'err', val}` for the bindings (they pass a tagged result through as is). */
export function errResult(e, operation) {
  return { tag: 'err', val: errorToWit(e, operation) };
}

/** Call `f` and, if it returns a Promise, map its outcome as well (for `async` handlers). */
export function guarded(operation, f, toOk) {
  const fail = (e) => errResult(e, operation);
  const succeed = (v) => {
    try {
      return { tag: 'ok', val: toOk(v) };
    } catch (e) {
      return fail(e);
    }
  };
  try {
    const out = f();
    if (out !== null && typeof out === 'object' && typeof out.then === 'function') {
      return Promise.resolve(out).then(succeed, fail);
    }
    return succeed(out);
  } catch (e) {
    return fail(e);
  }
}

// ---- host: logging and clock -----------------------------------------------------------------

const LEVELS = new Set(['trace', 'debug', 'info', 'warn', 'error']);

export function logAt(level, message) {
  let l = String(level).toLowerCase();
  if (l === 'warning') l = 'warn';
  if (!LEVELS.has(l)) l = 'info';
  witLog(l, typeof message === 'string' ? message : safeText(message));
}

/** Logging and clock: what every plugin (deployer or hook) may call on the host. */
export class BaseCtx {
  /** Log at `level` ("trace", "debug", "info", "warn", "error") into the host's output. */
  log(level, message) {
    logAt(level, message);
  }
  trace(message) {
    logAt('trace', message);
  }
  debug(message) {
    logAt('debug', message);
  }
  info(message) {
    logAt('info', message);
  }
  warn(message) {
    logAt('warn', message);
  }
  error(message) {
    logAt('error', message);
  }

  /** Wall clock as a `Date` (the host's clock). */
  now() {
    return new Date(this.nowMillis());
  }
  /** Wall clock, milliseconds since the Unix epoch (UTC), as a number. */
  nowMillis() {
    return Number(witNowUnixMillis());
  }
  /** Wall clock as RFC 3339 (`2026-01-01T00:00:00Z`), as Kubernetes timestamps. */
  nowRfc3339() {
    return witNowRfc3339();
  }
  /** Monotonic nanoseconds (BigInt) since a fixed point of this invocation. */
  monotonicNanos() {
    return witMonotonicNanos();
  }
}

// ---- DeployItem shorthands (used by Invocation and HookInput) --------------------------------

/** `metadata`, `name`, `namespace`, `annotations`, `labels` of `this.item` (a DeployItem). */
export class ItemView {
  get metadata() {
    return itemMeta(this.item);
  }
  get name() {
    return String(this.metadata.name ?? '');
  }
  get namespace() {
    return String(this.metadata.namespace ?? '');
  }
  get annotations() {
    return this.metadata.annotations ?? {};
  }
  get labels() {
    return this.metadata.labels ?? {};
  }
}

export function itemMeta(item) {
  const m = item && typeof item === 'object' ? item.metadata : undefined;
  return m && typeof m === 'object' ? m : {};
}
