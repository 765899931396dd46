// A deployer plugin that exercises the helper's edge cases; driven by tests/run.mjs through
// the component (`jco transpile`), with the imports mocked in tests/host-mock.js.
import {
  deployerPlugin, DeployerError, ConfigurationError, RetryableError, condition,
} from '../wasm-deployer.js';

export const deployer = deployerPlugin({
  describe: () => ({ name: 'edge', version: '0.0.1', deployItemTypes: ['test/edge'] }), // no hookTypes
  reconcile(ctx, inv) {
    const mode = inv.configString('mode');
    switch (mode) {
      case 'empty': return undefined;
      case 'full':
        ctx.checkpoint('full');
        return {
          phase: 'Progressing',
          providerStatus: { apiVersion: 'x/v1', kind: 'S', n: 1n },
          exports: '{"already":"json"}',
          conditions: [condition('Ready', false, 'Waiting', 'not yet'), { type: 'T', status: 'progressing' }],
          retryAfterMs: 1500,
        };
      case 'bigint-retry': return { retryAfterMs: 7n };
      case 'throw-string': throw 'plain string';
      case 'throw-number': throw 42;
      case 'throw-object': throw { some: 'thing' };
      case 'throw-null': throw null;
      case 'throw-record':
        throw { codes: ['ERR_TIMEOUT'], operation: '', reason: 'R', message: 'record thrown', conditions: [] };
      case 'throw-typeerror': return undefined.nope;
      case 'deployer-error':
        throw new DeployerError('custom', { codes: ['ERR_UNAUTHORIZED'], reason: 'Custom', operation: 'Op',
          conditions: [condition('C', 'True', 'R', 'm', ['ERR_X'])] });
      case 'retryable': throw new RetryableError('later');
      case 'config-error': throw new ConfigurationError('bad thing');
      case 'bad-status': return { conditions: [{ type: 'T', status: 'maybe' }] };
      case 'bad-exports': return { exports: 'not json' };
      case 'bad-retry': return { retryAfterMs: -1 };
      case 'bad-return': return 'Succeeded';
      case 'bad-error-condition':
        throw new DeployerError('x', { conditions: [{ type: 'T', status: 'nope' }] });
      case 'async': return Promise.resolve().then(() => ({ phase: 'Succeeded' }));
      case 'async-throw': return Promise.reject(new Error('async boom'));
      case 'k8s-error': ctx.k8s.get('v1', 'ConfigMap', 'x', 'ns'); return { phase: 'Succeeded' };
      case 'k8s-ops': {
        const got = ctx.k8s.get({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a', namespace: 'ns' } });
        const created = ctx.k8s.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a' } });
        const gone = ctx.k8s.delete({ apiVersion: 'v1', kind: 'Namespace', name: 'n' });
        const items = ctx.k8s.list('v1', 'ConfigMap', { namespace: 'ns' });
        const patched = ctx.k8s.patch({ apiVersion: 'v1', kind: 'ConfigMap', name: 'a', namespace: 'ns' },
          { data: { b: '1' } }, { type: 'apply', fieldManager: 'edge' });
        const info = ctx.k8s.discover('v1', 'ConfigMap');
        const sec = ctx.k8s.secondary('other').get('v1', 'Secret', 's', 'ns');
        return { exports: { got, created, gone, items, patched, info, sec, remaining: ctx.remainingMillis(),
          now: ctx.now().toISOString(), rfc: ctx.nowRfc3339(), mono: String(ctx.monotonicNanos()) } };
      }
      case 'config-types':
        return { exports: {
          n: inv.configNumber('n'), i: inv.configInteger('i'), d: inv.configString('nested.deep'),
          dflt: inv.configBool('missing', true), target: inv.target, content: inv.targetContent,
          context: inv.context, prev: inv.previousProviderStatus, phase: inv.phase,
        } };
      case 'wrong-type': return { exports: { v: inv.configInteger('n') } };
      default: throw new Error(`unknown mode ${mode}`);
    }
  },
  // no delete: the helper's default
});
