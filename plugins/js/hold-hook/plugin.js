// js-hold-hook: the example hook plugin in JavaScript (world `hook-plugin`).
//
// Holds DeployItems annotated `examples.wasm-deployer.dev/hold: "true"` before their reconcile
// and asks the host to look again after a second. Build: `plugins/js/build.sh OUT_DIR`.

import { hookPlugin } from '../../../sdk-guest/js/hooks.js';

const HOLD_ANNOTATION = 'examples.wasm-deployer.dev/hold';

// componentize-js looks for the export named after the WIT interface: `hooks`.
export const hooks = hookPlugin({
  describe: { name: 'js-hold-hook', version: '0.1.0', hookTypes: ['before-reconcile'] },

  run(ctx, input) {
    if (input.annotations[HOLD_ANNOTATION] !== 'true') return undefined; // no opinion
    ctx.info(`holding ${input.name}`);
    // requeue: false + requeueAfterMs: look again in a second (requeue: true means "now").
    return { abortReconcile: true, requeue: false, requeueAfterMs: 1000 };
  },
});
