// hooks.js — write wasm-deployer hook plugins in JavaScript (componentize-js), world
// `wasm-deployer:plugin/hook-plugin@1.5.0` (imports log and clock only; no Kubernetes).
//
//   import { hookPlugin } from './hooks.js';
//
//   export const hooks = hookPlugin({
//     describe: { name: 'my-hook', version: '0.1.0', hookTypes: ['before-reconcile'] },
//     run(ctx, input) {
//       if (input.annotations['example.dev/hold'] !== 'true') return undefined; // no opinion
//       ctx.info(`holding ${input.name}`);
//       return { abortReconcile: true, requeue: true, requeueAfterMs: 1000 };
//     },
//   });
//
// The export MUST be named `hooks` (the WIT interface name). Hook types may be written in the
// WIT spelling (`before-reconcile`) or Landscaper's (`BeforeReconcile`). `run` returns
// `undefined`/`null` for "no opinion" or `{abortReconcile, requeue, requeueAfterMs}` (every
// field optional). A throw becomes an `err(deployer-error)` exactly as in wasm-deployer.js
// (DeployerError keeps its codes; anything else is ERR_INTERNAL_PROBLEM with its text).
//
// A plugin exporting both a deployer and hooks (world `deployer-hook-plugin`) imports both
// wasm-deployer.js and this file.

import { BaseCtx, InternalError, ItemView, guarded, jsonType, listOf, parseHostJson, toU64 } from './common.js';

export * from './common.js';

/** Landscaper's hook names, in WIT order (as the Rust SDK's `HookType::as_str`). */
export const HOOK_TYPES = Object.freeze([
  'Start', 'DuringResponsibilityCheck', 'AfterResponsibilityCheck', 'ShouldReconcile', 'BeforeAnyReconcile',
  'BeforeAbort', 'BeforeForceReconcile', 'BeforeDelete', 'BeforeReconcile', 'End',
]);

const kebab = (s) => s.replace(/[A-Z]/g, (c, i) => (i ? '-' : '') + c.toLowerCase());
const WIT_HOOK_TYPES = HOOK_TYPES.map(kebab); // 'before-reconcile', ...

/** A hook type in either spelling -> the WIT enum string (`before-reconcile`). */
export function hookTypeToWit(t) {
  const s = String(t);
  if (WIT_HOOK_TYPES.includes(s)) return s;
  const i = HOOK_TYPES.indexOf(s);
  if (i >= 0) return WIT_HOOK_TYPES[i];
  throw new TypeError(`unknown hook type ${JSON.stringify(t)}; one of ${HOOK_TYPES.join(', ')}`);
}

/** The WIT enum string -> Landscaper's name (`BeforeReconcile`). */
export function hookTypeName(witType) {
  const i = WIT_HOOK_TYPES.indexOf(String(witType));
  return i >= 0 ? HOOK_TYPES[i] : String(witType);
}

/**
 * One hook call: `hookType` (Landscaper's name, e.g. "BeforeReconcile"), `witHookType`
 * ("before-reconcile"), `item` (the DeployItem object; undefined for Start), `target` (the
 * Target object, undefined if absent; never credentials), and `name`, `namespace`,
 * `annotations`, `labels` shorthands.
 */
export class HookInput extends ItemView {
  constructor({ hookType, item, target } = {}) {
    super();
    this.witHookType = hookTypeToWit(hookType);
    this.hookType = hookTypeName(this.witHookType);
    this.item = item;
    this.target = target;
  }

  static fromWit(w) {
    return new HookInput({
      hookType: w.hookType,
      item: parseHostJson(w.deployItem, 'deploy-item'),
      target: parseHostJson(w.target, 'target'),
    });
  }

}

/** What a hook may call on the host: logging and the clock (`ctx.info(...)`, `ctx.now()`, ...). */
export class HookCtx extends BaseCtx {}

/** `{abortReconcile, requeue, requeueAfterMs}` (all optional) -> WIT `option<hook-result>`. */
export function hookResultToWit(r) {
  if (r === undefined || r === null) return undefined; // none: no opinion
  if (typeof r !== 'object' || Array.isArray(r)) {
    throw new TypeError(`run must return a hook result object or undefined, got ${jsonType(r)}`);
  }
  return {
    abortReconcile: Boolean(r.abortReconcile),
    requeue: Boolean(r.requeue),
    requeueAfterMs: toU64(r.requeueAfterMs, 'requeueAfterMs'),
  };
}

function setupToWit(d) {
  if (d === null || typeof d !== 'object') throw new TypeError(`describe must give an object, got ${jsonType(d)}`);
  return {
    name: String(d.name ?? ''),
    version: String(d.version ?? ''),
    hookTypes: listOf(d.hookTypes, 'hookTypes').map(hookTypeToWit),
  };
}

/**
 * The object to export as `hooks`:
 * `export const hooks = hookPlugin({ describe: {name, version, hookTypes}, run(ctx, input) })`.
 */
export function hookPlugin(impl) {
  if (impl === null || typeof impl !== 'object') throw new TypeError('hookPlugin needs an object');
  const { describe, run } = impl;
  return {
    describe() {
      return setupToWit(typeof describe === 'function' ? describe() : describe);
    },
    run(input) {
      const operation = hookTypeName(input?.hookType);
      return guarded(operation, () => {
        if (typeof run !== 'function') throw new InternalError('run is not implemented');
        return run(new HookCtx(), HookInput.fromWit(input));
      }, hookResultToWit);
    },
  };
}
