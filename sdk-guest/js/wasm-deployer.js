// wasm-deployer.js — write wasm-deployer deployer plugins in JavaScript (componentize-js).
//
// The JS twin of the Rust `sdk-guest` crate, for the WIT world
// `wasm-deployer:plugin/deployer-plugin@1.5.0`. A plugin author never touches WIT records:
//
//   import { deployerPlugin, ConfigurationError } from './wasm-deployer.js';
//
//   export const deployer = deployerPlugin({
//     describe: { name: 'hello', version: '0.1.0', deployItemTypes: ['example.dev/hello'] },
//     reconcile(ctx, inv) {
//       const message = inv.configString('message');       // ConfigurationError if missing
//       ctx.info(`saying ${message}`);
//       return { phase: 'Succeeded', exports: { message } };
//     },
//     delete(ctx, inv) {
//       return { phase: 'Succeeded' };
//     },
//   });
//
// The export MUST be named `deployer` (the WIT interface name). What the helper does:
// - parses the invocation's JSON strings into objects (`Invocation`: inv.item, inv.config,
//   inv.target, ...), with typed accessors for the provider configuration that throw
//   `ConfigurationError` naming the field;
// - converts the returned `{phase, providerStatus, exports, conditions, retryAfterMs}` into the
//   WIT `response` with every field present (objects become JSON text, numbers become BigInt);
// - maps thrown `DeployerError`s (ConfigurationError, InternalError, ...) onto the WIT
//   `deployer-error` and fills `operation`;
// - turns ANY other throw (an Error, a string, any value), and any value it cannot convert,
//   into ERR_INTERNAL_PROBLEM (reason UncaughtException) with the exception text — never a trap;
// - gives `ctx`: logging, clock, progress checkpoints and Kubernetes (`ctx.k8s`) on objects.
// Handlers may be `async`; the helper awaits them (componentize-js runs the event loop until the
// promise an export returns settles).
//
// HTTP (WIT 1.5): the global `fetch()` works (componentize-js implements it over
// `wasi:http/outgoing-handler`; `componentize.mjs` enables it for the deployer worlds). The host
// sends a request only under the item's Target `url` (type `wasm-deployer.dev/http-api`) or a
// prefix of its `http.allow`, adds the credentials itself, and follows no redirect:
//
//   async reconcile(ctx, inv) {
//     const url = targetUrl(inv, inv.configString('path'));   // <Target url>/<path>
//     const res = await httpFetch(url, { method: 'PUT', headers: { 'content-type': 'application/json' },
//                                        body: JSON.stringify(inv.configObject('body')) });
//     await httpCheck(res, 'PUT', url);   // 401/403, other 4xx, 5xx -> the mapped DeployerError
//     return { phase: 'Succeeded', exports: { body: await jsonOrNull(res) } };
//   }
//
// `httpFetch` is `fetch` with a rejection (no answer) mapped: HttpRequestFailed (retryable) or
// HttpNotAllowed; `httpStatusError` and `httpFetchError` are the mappings themselves.
//
// Hook plugins (world `hook-plugin`) use `hooks.js` instead: it imports only log and clock.

import { checkpoint as witCheckpoint, remainingMillis as witRemainingMillis } from 'wasm-deployer:plugin/progress@1.5.0';
import * as witKube from 'wasm-deployer:plugin/kubernetes@1.5.0';
import * as witCluster from 'wasm-deployer:plugin/cluster@1.5.0';
import * as witSecondary from 'wasm-deployer:plugin/secondary-targets@1.5.0';
import {
  BaseCtx,
  ConfigurationError,
  DeployerError,
  InternalError,
  RetryableError,
  UnauthorizedError,
  conditionToWit,
  errorFromWit,
  guarded,
  ItemView,
  jsonType,
  listOf,
  parseHostJson,
  toJsonText,
  toU64,
} from './common.js';

export * from './common.js';

// ---- host calls ------------------------------------------------------------------------------

/** Call an import; its `err(deployer-error)` becomes a thrown `DeployerError`. */
function hostCall(f, ...args) {
  try {
    return f(...args);
  } catch (e) {
    if (e !== null && typeof e === 'object' && Object.prototype.hasOwnProperty.call(e, 'payload') &&
        e.payload !== null && typeof e.payload === 'object' && Array.isArray(e.payload.codes)) {
      throw errorFromWit(e.payload);
    }
    throw e;
  }
}

/**
 * A WIT `object-ref` from `(apiVersion, kind, name, namespace?)`, or from one object: either a
 * ref `{apiVersion, kind, name, namespace}` or a Kubernetes object `{apiVersion, kind,
 * metadata: {name, namespace}}`.
 */
function objectRef(args, what) {
  let apiVersion, kind, name, namespace;
  if (typeof args[0] === 'string') {
    [apiVersion, kind, name, namespace] = args;
  } else if (args[0] !== null && typeof args[0] === 'object') {
    const o = args[0];
    const m = o.metadata && typeof o.metadata === 'object' ? o.metadata : {};
    apiVersion = o.apiVersion;
    kind = o.kind;
    name = o.name ?? m.name;
    namespace = o.namespace ?? m.namespace;
  } else {
    throw new TypeError(`${what}: expected (apiVersion, kind, name, namespace?) or an object, got ${jsonType(args[0])}`);
  }
  for (const [k, v] of [['apiVersion', apiVersion], ['kind', kind], ['name', name]]) {
    if (typeof v !== 'string' || v === '') throw new TypeError(`${what}: ${k} must be a non-empty string`);
  }
  return {
    apiVersion,
    kind,
    namespace: namespace === undefined || namespace === null || namespace === '' ? undefined : String(namespace),
    name,
  };
}

function objectText(obj, what) {
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) {
    throw new TypeError(`${what}: expected a Kubernetes object, got ${jsonType(obj)}`);
  }
  return toJsonText(obj, what);
}

/**
 * Kubernetes on the cluster of the item's resolved Target, with plain objects (`ctx.k8s`).
 * Errors of the host (with Landscaper codes and the Kubernetes reason, e.g. `NotFound`,
 * `Conflict`) are thrown as `DeployerError`; let them propagate to fail the step with them.
 */
export class Kubernetes {
  /** The object, or `undefined` if it does not exist. `get(apiVersion, kind, name, namespace?)` or `get(ref)`. */
  get(...args) {
    const ref = objectRef(args, 'k8s.get');
    return parseHostJson(hostCall(witKube.get, ref), `get ${ref.kind} ${ref.name}`);
  }
  /** Create `obj` (apiVersion, kind, metadata); returns the created object. */
  create(obj) {
    return parseHostJson(hostCall(witKube.create, objectText(obj, 'k8s.create')), 'create');
  }
  /** Replace `obj` (`metadata.resourceVersion` gives optimistic concurrency); returns it. */
  update(obj) {
    return parseHostJson(hostCall(witKube.update, objectText(obj, 'k8s.update')), 'update');
  }
  /** Delete an object; `true` if it existed, `false` if it was already gone. Same arguments as `get`. */
  delete(...args) {
    return Boolean(hostCall(witKube.delete, objectRef(args, 'k8s.delete')));
  }
  /** The items of one kind (objects with apiVersion and kind); all namespaces if `namespace` is unset. */
  list(apiVersion, kind, { namespace, labelSelector } = {}) {
    const out = hostCall(witCluster.list, String(apiVersion), String(kind), namespace || undefined,
      labelSelector || undefined);
    return parseHostJson(out, `list ${kind}`)?.items ?? [];
  }
  /**
   * Patch an object: `patch(ref, patch, {type: 'merge'|'json'|'apply', fieldManager, force})`
   * (`ref` as for `get`); returns the patched object.
   */
  patch(ref, patch, { type = 'merge', fieldManager, force = false } = {}) {
    const patchType = String(type).toLowerCase();
    if (!['merge', 'json', 'apply'].includes(patchType)) {
      throw new TypeError(`k8s.patch: type must be merge, json or apply, not ${JSON.stringify(type)}`);
    }
    const options = { patchType, fieldManager: fieldManager ? String(fieldManager) : undefined, force: Boolean(force) };
    const out = hostCall(witCluster.patch, objectRef([ref], 'k8s.patch'), toJsonText(patch, 'patch'), options);
    return parseHostJson(out, 'patch');
  }
  /** Discovery: `{apiVersion, kind, plural, namespaced}`, or `undefined` if the cluster does not serve the kind. */
  discover(apiVersion, kind) {
    return hostCall(witCluster.discover, String(apiVersion), String(kind)) ?? undefined;
  }
  /** Read/list/delete on the cluster of another Target (in the item's namespace) named `targetName`. */
  secondary(targetName) {
    return new SecondaryTarget(String(targetName));
  }
}

/** Kubernetes on the cluster of a secondary Target (`ctx.k8s.secondary(name)`): get, list, delete. */
export class SecondaryTarget {
  constructor(targetName) {
    this.targetName = targetName;
  }
  get(...args) {
    const ref = objectRef(args, 'secondary.get');
    return parseHostJson(hostCall(witSecondary.get, this.targetName, ref), `get ${ref.kind} ${ref.name}`);
  }
  list(apiVersion, kind, { namespace, labelSelector } = {}) {
    const out = hostCall(witSecondary.list, this.targetName, String(apiVersion), String(kind),
      namespace || undefined, labelSelector || undefined);
    return parseHostJson(out, `list ${kind}`)?.items ?? [];
  }
  delete(...args) {
    return Boolean(hostCall(witSecondary.delete, this.targetName, objectRef(args, 'secondary.delete')));
  }
}

/** What plugin code may call on the host during one reconcile/delete step. */
export class Ctx extends BaseCtx {
  constructor() {
    super();
    this.k8s = new Kubernetes();
  }
  /**
   * Report a progress checkpoint. Throws a `DeployerError` (ERR_TIMEOUT) once the item's
   * progressing timeout has passed; let it propagate.
   */
  checkpoint(name) {
    hostCall(witCheckpoint, String(name));
  }
  /** Milliseconds left until the progressing timeout (a number), or `undefined` if it has passed. */
  remainingMillis() {
    const r = witRemainingMillis();
    return r === undefined || r === null ? undefined : Number(r);
  }
}

// ---- the invocation --------------------------------------------------------------------------

const REQUIRED = Symbol('required');

/**
 * One reconcile/delete step, with every JSON string parsed:
 * - `item`: the DeployItem (metadata, spec, status); `name`, `namespace`, `annotations`, `phase`;
 * - `config`: `spec.config` (the ProviderConfiguration); throws `ConfigurationError` (reason
 *   ProviderConfigurationMissing) when it is absent, null or `{}`;
 * - `configString/Bool/Number/Object/Array(field, default?)`: typed fields of it (dots walk
 *   into nested objects); without a default a missing field is a `ConfigurationError`;
 * - `target` (the Target object), `targetContent` (its resolved content: `spec.config` or the
 *   Secret data, parsed if JSON), `context`, `previousProviderStatus`: objects or undefined.
 */
export class Invocation extends ItemView {
  constructor({ item, target, targetContent, context, previousProviderStatus } = {}) {
    super();
    this.item = item !== null && typeof item === 'object' ? item : {};
    this.target = target;
    this.targetContent = targetContent;
    this.context = context;
    this.previousProviderStatus = previousProviderStatus;
  }

  static fromWit(w) {
    let target, targetContent;
    if (w.target) {
      target = parseHostJson(w.target.target, 'target');
      try {
        targetContent = JSON.parse(w.target.content);
      } catch (_) {
        targetContent = w.target.content; // not JSON: the raw text
      }
    }
    return new Invocation({
      item: parseHostJson(w.deployItem, 'deploy-item'),
      target,
      targetContent,
      context: parseHostJson(w.context, 'context'),
      previousProviderStatus: parseHostJson(w.previousProviderStatus, 'previous-provider-status'),
    });
  }

  get phase() {
    return String(this.item.status?.phase ?? '');
  }

  /** `spec.config`, or undefined if absent, null or an empty object. */
  get configRaw() {
    const c = this.item.spec?.config;
    if (c === undefined || c === null) return undefined;
    if (typeof c === 'object' && !Array.isArray(c) && Object.keys(c).length === 0) return undefined;
    return c;
  }

  get config() {
    const c = this.configRaw;
    if (c === undefined) {
      throw new ConfigurationError('provider configuration missing', { reason: 'ProviderConfigurationMissing' });
    }
    if (typeof c !== 'object' || Array.isArray(c)) {
      throw new ConfigurationError(`spec.config: expected an object, got ${jsonType(c)}`,
        { reason: 'ParseProviderConfiguration' });
    }
    return c;
  }

  /**
   * `spec.config.<field>` checked against `type` ('string', 'boolean', 'number', 'integer',
   * 'object', 'array', or an array of them). Missing/null -> `dflt`, or a ConfigurationError
   * naming the field if no default is given.
   */
  configValue(field, type, dflt = REQUIRED) {
    const types = Array.isArray(type) ? type : [type];
    let v = this.config;
    for (const part of String(field).split('.')) {
      v = v !== null && typeof v === 'object' && !Array.isArray(v) ? v[part] : undefined;
    }
    const want = types.join(' or ');
    if (v === undefined || v === null) {
      if (dflt !== REQUIRED) return dflt;
      throw new ConfigurationError(`spec.config.${field}: required ${want} is missing`,
        { reason: 'ParseProviderConfiguration' });
    }
    const got = jsonType(v);
    const ok = types.some((t) => t === got || (t === 'number' && got === 'integer'));
    if (!ok) {
      throw new ConfigurationError(`spec.config.${field}: expected a ${want}, got ${got}`,
        { reason: 'ParseProviderConfiguration' });
    }
    return v;
  }
  configString(field, dflt = REQUIRED) {
    return this.configValue(field, 'string', dflt);
  }
  configBool(field, dflt = REQUIRED) {
    return this.configValue(field, 'boolean', dflt);
  }
  configNumber(field, dflt = REQUIRED) {
    return this.configValue(field, 'number', dflt);
  }
  configInteger(field, dflt = REQUIRED) {
    return this.configValue(field, 'integer', dflt);
  }
  configObject(field, dflt = REQUIRED) {
    return this.configValue(field, 'object', dflt);
  }
  configArray(field, dflt = REQUIRED) {
    return this.configValue(field, 'array', dflt);
  }

  /**
   * `spec.config.url` of the item's Target, which must have type `wasm-deployer.dev/http-api`.
   * ConfigurationError if there is no Target (reason NoTarget), it has another type
   * (TargetType) or no http(s) `url` (TargetUrl).
   */
  httpBaseUrl() {
    return targetBaseUrl(this);
  }

  /** The Target's `url` joined with the relative `path` (see `targetUrl`). */
  httpUrl(path) {
    return targetUrl(this, path);
  }
}

// ---- HTTP (WIT 1.5: wasi:http/outgoing-handler through the global fetch) ------------------------

/** The Target type that names an HTTP API (`spec.config.url`, optional `caData` and `auth`). */
export const HTTP_API_TARGET_TYPE = 'wasm-deployer.dev/http-api';

/** How many characters of a response body an error message quotes. */
export const BODY_IN_MESSAGE = 500;

/**
 * `base` and a relative `path` joined with exactly one `/` (`https://h/v1` or `https://h/v1/`
 * with `things/a` or `/things/a`: `https://h/v1/things/a`). An empty path gives `base`.
 */
export function joinUrl(base, path) {
  const b = String(base);
  const p = String(path ?? '');
  if (p === '') return b;
  return `${b.replace(/\/+$/, '')}/${p.replace(/^\/+/, '')}`;
}

/**
 * What is wrong with `path` as a path relative to a base URL (not a string, an absolute URL
 * `https://...` or `//host/...`, a `..` segment, also percent-encoded), or `undefined` if it is
 * fine.
 */
export function relativePathProblem(path) {
  if (typeof path !== 'string') return `path must be a string, got ${jsonType(path)}`;
  if (path.includes('://') || path.startsWith('//')) {
    return `path ${JSON.stringify(path)} is an absolute URL; it must be relative to the Target's url`;
  }
  const beforeQuery = path.split(/[?#]/)[0];
  if (beforeQuery.split(/[/\\]/).some((seg) => seg.toLowerCase().replaceAll('%2e', '.') === '..')) {
    return `path ${JSON.stringify(path)} contains ".."; it must stay under the Target's url`;
  }
  return undefined;
}

/**
 * `spec.config.url` of the invocation's Target (type `wasm-deployer.dev/http-api`), as written.
 * ConfigurationError (ERR_CONFIGURATION_PROBLEM) naming what is wrong otherwise.
 */
export function targetBaseUrl(inv) {
  const problem = (reason, message) => new ConfigurationError(message, { reason });
  const target = inv?.target;
  if (target === undefined || target === null) {
    throw problem('NoTarget',
      `no target defined: the DeployItem needs a Target of type ${HTTP_API_TARGET_TYPE}`);
  }
  const name = String(target?.metadata?.name ?? '');
  const type = target?.spec?.type;
  if (type !== HTTP_API_TARGET_TYPE) {
    throw problem('TargetType', `Target ${JSON.stringify(name)} has type ${JSON.stringify(type ?? '')}; ` +
      `HTTP requests need a Target of type ${JSON.stringify(HTTP_API_TARGET_TYPE)}`);
  }
  const content = inv.targetContent;
  if (content === null || typeof content !== 'object' || Array.isArray(content)) {
    throw problem('TargetUrl', `Target ${JSON.stringify(name)}: its config is not a JSON object`);
  }
  if (content.url === undefined || content.url === null) {
    throw problem('TargetUrl', `Target ${JSON.stringify(name)} has no url (spec.config.url)`);
  }
  const url = typeof content.url === 'string' ? content.url.trim() : '';
  if (url === '') {
    throw problem('TargetUrl', `Target ${JSON.stringify(name)}: spec.config.url must be a non-empty string`);
  }
  const rest = /^https?:\/\/(.*)$/i.exec(url)?.[1];
  if (rest === undefined || rest === '' || rest.startsWith('/')) {
    throw problem('TargetUrl',
      `Target ${JSON.stringify(name)}: url ${JSON.stringify(url)} is not an http:// or https:// URL`);
  }
  return url;
}

/**
 * The URL of `path` under the invocation's Target: `targetBaseUrl(inv)` joined with the relative
 * `path` (`https://h/v1/` + `things/a` = `https://h/v1/things/a`). ConfigurationError (reason
 * InvalidPath) if `path` is not a string, is an absolute URL or has a `..` segment; see
 * `targetBaseUrl` for the Target's errors.
 */
export function targetUrl(inv, path) {
  const bad = relativePathProblem(path);
  if (bad !== undefined) throw new ConfigurationError(bad, { reason: 'InvalidPath' });
  return joinUrl(targetBaseUrl(inv), path);
}

function quoteBody(text) {
  const t = String(text ?? '').trim();
  const chars = Array.from(t);
  return chars.length > BODY_IN_MESSAGE ? `${chars.slice(0, BODY_IN_MESSAGE).join('')}...` : t;
}

/**
 * The error for a 4xx or 5xx answer, `undefined` otherwise: 401/403 UnauthorizedError
 * (ERR_UNAUTHORIZED, reason Unauthorized), other 4xx ConfigurationError
 * (ERR_CONFIGURATION_PROBLEM, HttpClientError), 5xx RetryableError (no code, HttpServerError);
 * message `<METHOD> <URL>: <status> <body, first 500 characters>`.
 */
export function httpStatusError(method, url, status, bodyText = '') {
  const s = Number(status);
  const quoted = quoteBody(bodyText);
  const message = `${String(method).toUpperCase()} ${url}: ${s}${quoted ? ` ${quoted}` : ''}`;
  if (s === 401 || s === 403) return new UnauthorizedError(message, { reason: 'Unauthorized' });
  if (s >= 400 && s <= 499) return new ConfigurationError(message, { reason: 'HttpClientError' });
  if (s >= 500 && s <= 599) return new RetryableError(message, { reason: 'HttpServerError' });
  return undefined;
}

/**
 * A rejection of `fetch()` (a request that got no answer) as the error to throw: refused by
 * the host (`HTTP-request-denied`) -> ConfigurationError, reason HttpNotAllowed (the host fails
 * the item so anyway); anything else (connection refused, timeout, reset, TLS) ->
 * RetryableError, reason HttpRequestFailed; the message is `<METHOD> <URL>: <cause>`.
 * A DeployerError passes through as it is.
 */
export function httpFetchError(e, method, url) {
  if (e instanceof DeployerError) return e;
  const m = String(method).toUpperCase();
  let cause;
  if (e instanceof Error) {
    cause = e.message ? `${e.name || 'Error'}: ${e.message}` : e.name || 'Error';
    if (e.cause !== undefined && e.cause !== null) cause += ` (${e.cause instanceof Error ? e.cause.message : String(e.cause)})`;
  } else {
    cause = String(e);
  }
  if (/request[- ]denied|not allowed|HTTP-request-denied/i.test(cause)) {
    return new ConfigurationError(`${m} ${url}: not allowed by the host (${cause}): a plugin may send requests ` +
      "only under its item's Target url or a prefix of the host's http.allow", { reason: 'HttpNotAllowed' });
  }
  return new RetryableError(`${m} ${url}: ${cause}`, { reason: 'HttpRequestFailed' });
}

/**
 * `fetch(url, init)` with a rejection mapped by `httpFetchError` (HttpRequestFailed,
 * retryable; HttpNotAllowed). The Response is returned whatever its status: check it with
 * `httpCheck`.
 */
export async function httpFetch(url, init = {}) {
  const method = String(init?.method ?? 'GET').toUpperCase();
  try {
    return await fetch(url, init);
  } catch (e) {
    throw httpFetchError(e, method, url);
  }
}

/**
 * Throws the mapped error (`httpStatusError`) for a 4xx/5xx Response, reading its body for the
 * message; returns `resp` (body unread) otherwise. `allow` lists statuses that are not errors
 * (e.g. `[404]` on DELETE). `method` and `url` name the request in the message.
 */
export async function httpCheck(resp, method = 'GET', url = undefined, { allow = [] } = {}) {
  const status = Number(resp?.status);
  const where = url ?? resp?.url ?? '';
  if (status < 400 || allow.map(Number).includes(status)) return resp;
  let text = '';
  try {
    text = await resp.text();
  } catch (e) {
    throw httpFetchError(e, method, where);
  }
  const err = httpStatusError(method, where, status, text);
  if (err !== undefined) throw err;
  return resp;
}

/**
 * The body of `resp` as JSON; `null` if it is empty or not JSON. A body that breaks off while
 * being read is an HttpRequestFailed error (retryable) naming `method` and `url`.
 */
export async function jsonOrNull(resp, method = 'GET', url = undefined) {
  let text;
  try {
    text = await resp.text();
  } catch (e) {
    throw httpFetchError(e, method, url ?? resp?.url ?? '');
  }
  if (text.trim() === '') return null;
  try {
    return JSON.parse(text);
  } catch (_) {
    return null;
  }
}

// ---- the deployer export ---------------------------------------------------------------------

/**
 * A response (WIT `response`) from a plain object — every field optional:
 * `{phase, providerStatus, exports, conditions, retryAfterMs}`. `providerStatus` and
 * `exports` are objects (a string is taken as JSON text), `retryAfterMs` a number or BigInt.
 * `undefined` means "nothing to change".
 */
export function responseToWit(r) {
  if (r === undefined || r === null) r = {};
  if (typeof r !== 'object' || Array.isArray(r)) {
    throw new TypeError(`reconcile/delete must return a response object, got ${jsonType(r)}`);
  }
  return {
    phase: r.phase === undefined || r.phase === null ? undefined : String(r.phase),
    providerStatus: toJsonText(r.providerStatus, 'providerStatus'),
    exports: toJsonText(r.exports, 'exports'),
    conditions: listOf(r.conditions, 'conditions').map(conditionToWit),
    retryAfterMs: toU64(r.retryAfterMs, 'retryAfterMs'),
  };
}

function descriptionToWit(d) {
  if (d === null || typeof d !== 'object') throw new TypeError(`describe must give an object, got ${jsonType(d)}`);
  return {
    name: String(d.name ?? ''),
    version: String(d.version ?? ''),
    deployItemTypes: listOf(d.deployItemTypes, 'deployItemTypes').map(String),
    hookTypes: listOf(d.hookTypes, 'hookTypes').map(String),
  };
}

function step(operation, handler, witInvocation) {
  return guarded(operation, () => {
    if (typeof handler !== 'function') throw new InternalError(`${operation} is not implemented`);
    return handler(new Ctx(), Invocation.fromWit(witInvocation));
  }, responseToWit);
}

/**
 * The object to export as `deployer`:
 * `export const deployer = deployerPlugin({ describe, reconcile(ctx, inv), delete(ctx, inv) })`.
 * `describe` is an object `{name, version, deployItemTypes, hookTypes?}` or a function
 * returning one. `delete` defaults to "nothing to do" (phase unchanged).
 */
export function deployerPlugin(impl) {
  if (impl === null || typeof impl !== 'object') throw new TypeError('deployerPlugin needs an object');
  const { describe, reconcile } = impl;
  const del = impl.delete ?? (() => ({}));
  return {
    describe() {
      // describe has no error case in WIT: a throw here is a load-time failure of the plugin.
      return descriptionToWit(typeof describe === 'function' ? describe() : describe);
    },
    reconcile(invocation) {
      return step('reconcile', reconcile, invocation);
    },
    delete(invocation) {
      return step('delete', del, invocation);
    },
  };
}

