// Mocked host imports for tests/run.mjs (jco transpile --map ...).
export const calls = [];
export const answers = {};
export const fail = new Map(); // op -> deployer-error record
class ComponentError extends Error {
  constructor(payload) { super(payload.message); Object.defineProperty(this, 'payload', { value: payload }); }
}
const call = (op, ...args) => {
  calls.push([op, ...args]);
  if (fail.has(op)) throw new ComponentError(fail.get(op));
  return answers[op];
};
export const log = { log: (level, message) => calls.push(['log', level, message]) };
export const clock = {
  nowUnixMillis: () => 1767225600000n, nowRfc3339: () => '2026-01-01T00:00:00Z', monotonicNanos: () => 5n,
};
export const progress = {
  checkpoint: (name) => call('checkpoint', name),
  remainingMillis: () => 1234n,
};
export const kubernetes = {
  get: (ref) => call('get', ref), create: (o) => call('create', o), update: (o) => call('update', o),
  delete: (ref) => call('delete', ref),
};
export const cluster = {
  get: (ref) => call('cluster.get', ref), list: (...a) => call('list', ...a), create: (o) => call('cluster.create', o),
  update: (o) => call('cluster.update', o), patch: (...a) => call('patch', ...a), delete: (r) => call('cluster.delete', r),
  discover: (...a) => call('discover', ...a),
};
export const secondaryTargets = {
  get: (...a) => call('secondary.get', ...a), list: (...a) => call('secondary.list', ...a),
  delete: (...a) => call('secondary.delete', ...a),
};
// WIT 1.2 `fetch` (the world imports it; the helper does not use it yet).
export const fetch = {
  httpGet: (...a) => call('fetch.httpGet', ...a), ociPull: (...a) => call('fetch.ociPull', ...a),
};
// WIT 1.3 `ocm` (the world imports it; the helper does not use it yet).
export const ocm = {
  getResource: (...a) => call('ocm.getResource', ...a),
};
// WIT 1.4 `cluster-info` (the world imports it; the helper does not use it yet).
export const clusterInfo = {
  serverVersion: (...a) => call('clusterInfo.serverVersion', ...a),
  apiVersions: (...a) => call('clusterInfo.apiVersions', ...a),
};
