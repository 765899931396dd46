// js-echo: the example deployer plugin in JavaScript (world `deployer-plugin`).
//
// Writes the provider configuration's `message` into a ConfigMap `<item>-echo` next to the
// DeployItem and exports it. Build: `plugins/js/build.sh OUT_DIR`.

import { deployerPlugin } from '../../../sdk-guest/js/wasm-deployer.js';

const API_VERSION = 'examples.wasm-deployer.dev/v1';

const configMapName = (inv) => `${inv.name}-echo`;

// componentize-js looks for the export named after the WIT interface: `deployer`.
export const deployer = deployerPlugin({
  describe: {
    name: 'js-echo',
    version: '0.1.0',
    deployItemTypes: ['examples.wasm-deployer.dev/echo-js'],
    hookTypes: [],
  },

  reconcile(ctx, inv) {
    // ConfigurationError (ERR_CONFIGURATION_PROBLEM) naming the field if missing or not a string.
    const message = inv.configString('message');
    if (inv.configBool('crash', false)) {
      // Uncaught on purpose: the helper turns it into ERR_INTERNAL_PROBLEM.
      throw new Error('crash requested');
    }

    const name = configMapName(inv);
    const namespace = inv.namespace;
    ctx.info(`echo: writing ${JSON.stringify(message)} into ConfigMap ${namespace}/${name}`);
    const existing = ctx.k8s.get('v1', 'ConfigMap', name, namespace);
    if (existing === undefined) {
      ctx.k8s.create({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name, namespace },
        data: { message },
      });
    } else {
      existing.data = { message };
      ctx.k8s.update(existing);
    }

    return {
      phase: 'Succeeded',
      providerStatus: { apiVersion: API_VERSION, kind: 'ProviderStatus', configMap: name },
      exports: { message },
    };
  },

  delete(ctx, inv) {
    const name = configMapName(inv);
    const existed = ctx.k8s.delete('v1', 'ConfigMap', name, inv.namespace);
    ctx.info(`echo: ConfigMap ${inv.namespace}/${name} ${existed ? 'deleted' : 'was already gone'}`);
    return { phase: 'Succeeded' };
  },
});
