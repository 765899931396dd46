// js-http-api: the example HTTP API deployer in JavaScript (world `deployer-plugin`, WIT 1.5).
//
// DeployItem `spec.config`: `{path: "things/a", body: {...any JSON...}}`, with a Target of type
// `wasm-deployer.dev/http-api` (`spec.config.url`; the host adds its credentials):
// - reconcile: `PUT <Target url>/<path>` with `body` as JSON; 2xx -> Succeeded, exports
//   `{status, body}` (the JSON answer, or null);
// - delete: `DELETE <Target url>/<path>`; 2xx or 404 -> done.
// 401/403, other 4xx -> the item fails; 5xx and no answer (refused, timeout) -> retried.
// Build: `plugins/js/build.sh OUT_DIR`.

import {
  deployerPlugin, httpCheck, httpFetch, jsonOrNull, targetUrl,
} from '../../../sdk-guest/js/wasm-deployer.js';

/**
 * `spec.config.path` as a URL under the Target's `url`; ConfigurationError naming what is wrong
 * (path missing, not a string, absolute or with `..`; no Target, or one without `url`).
 */
const itemUrl = (inv) => targetUrl(inv, inv.configString('path'));

// componentize-js looks for the export named after the WIT interface: `deployer`.
export const deployer = deployerPlugin({
  describe: {
    name: 'js-http-api',
    version: '0.1.0',
    deployItemTypes: ['example.wasm-deployer.dev/js-http-api'],
    hookTypes: [],
  },

  // async: componentize-js runs the event loop (the fetch) until the returned promise settles.
  async reconcile(ctx, inv) {
    const url = itemUrl(inv);
    const body = inv.config.body ?? null;
    ctx.info(`PUT ${url}`);
    const res = await httpFetch(url, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(body),
    });
    await httpCheck(res, 'PUT', url); // 401/403, other 4xx, 5xx -> the mapped error
    const answer = await jsonOrNull(res, 'PUT', url);
    ctx.info(`PUT ${url}: ${res.status}`);
    return { phase: 'Succeeded', exports: { status: res.status, body: answer } };
  },

  async delete(ctx, inv) {
    const url = itemUrl(inv);
    ctx.info(`DELETE ${url}`);
    const res = await httpFetch(url, { method: 'DELETE' });
    await httpCheck(res, 'DELETE', url, { allow: [404] }); // 404: already gone
    ctx.info(`DELETE ${url}: ${res.status}${res.status === 404 ? ' (already gone)' : ''}`);
    return {};
  },
});
