// wasm-deployer.js — write wasm-deployer deployer plugins in JavaScript (componentize-js).
//
// The JS twin of the Rust `sdk-guest` crate, for the WIT world
// `wasm-deployer:plugin/deployer-plugin@1.4.0`. A plugin author never touches WIT records:
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
// Handlers may be `async`; the helper awaits them.
//
// Hook plugins (world `hook-plugin`) use `hooks.js` instead: it imports only log and clock.

import { checkpoint as witCheckpoint, remainingMillis as witRemainingMillis } from 'wasm-deployer:plugin/progress@1.4.0';
import * as witKube from 'wasm-deployer:plugin/kubernetes@1.4.0';
import * as witCluster from 'wasm-deployer:plugin/cluster@1.4.0';
import * as witSecondary from 'wasm-deployer:plugin/secondary-targets@1.4.0';
import {
  BaseCtx,
  ConfigurationError,
  InternalError,
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

