// A deployer plugin that exercises the helper's edge cases; driven by tests/run.mjs through
// the component (`jco transpile`), with the imports mocked in tests/host-mock.js.
import {
  deployerPlugin, DeployerError, ConfigurationError, RetryableError, condition,
  targetUrl, joinUrl, httpStatusError, httpFetchError, httpCheck, httpFetch, jsonOrNull,
} from '../wasm-deployer.js';

// A thrown value as a plain record (for the HTTP helper checks).
const caught = (f) => {
  try {
    return { ok: f() };
  } catch (e) {
    return { name: e.constructor?.name, codes: e.codes, reason: e.reason, message: e.message };
  }
};
const asRecord = (e) => (e === undefined ? null : { name: e.constructor.name, codes: e.codes, reason: e.reason, message: e.message });
// A stand-in for a fetch Response.
const fakeResponse = (status, text, { broken = false } = {}) => ({
  status, url: 'https://h/v1/r',
  text: () => (broken ? Promise.reject(new TypeError('body broke off')) : Promise.resolve(text)),
});

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
      case 'http-url':
        return { exports: {
          joined: [['https://h/v1', 'things/a'], ['https://h/v1/', '/things/a'], ['https://h/v1//', 'a?x=1'],
            ['https://h/v1', '']].map(([b, p]) => joinUrl(b, p)),
          url: caught(() => targetUrl(inv, inv.configValue('path', ['string', 'integer'], undefined))),
          method: caught(() => inv.httpUrl('x/y')),
          base: caught(() => inv.httpBaseUrl()),
        } };
      case 'http-map': {
        const long = 'x'.repeat(600);
        return { exports: {
          statuses: [[200, ''], [302, ''], [401, 'no'], [403, ' denied \n'], [404, long], [409, ''], [500, 'boom'],
            [503, '']].map(([st, body]) => asRecord(httpStatusError('put', 'https://h/v1/a', st, body))),
          refused: asRecord(httpFetchError(new TypeError('NetworkError when attempting to fetch resource'), 'get', 'https://h/x')),
          denied: asRecord(httpFetchError(new TypeError('wasi:http error HTTP-request-denied'), 'GET', 'https://e/x')),
          passthrough: asRecord(httpFetchError(new ConfigurationError('mine'), 'GET', 'https://h/x')),
          thrownString: asRecord(httpFetchError('timeout', 'DELETE', 'https://h/x')),
        } };
      }
      case 'http-check': {
        const out = {};
        const run = async (name, f) => {
          try {
            out[name] = await f();
          } catch (e) {
            out[name] = asRecord(e);
          }
        };
        return (async () => {
          await run('ok', async () => (await httpCheck(fakeResponse(201, '{"a":1}'), 'PUT', 'https://h/v1/a')).status);
          await run('json', () => jsonOrNull(fakeResponse(200, '{"a":1}')));
          await run('empty', () => jsonOrNull(fakeResponse(204, '')));
          await run('notJson', () => jsonOrNull(fakeResponse(200, '<html>')));
          await run('brokenJson', () => jsonOrNull(fakeResponse(200, '', { broken: true }), 'PUT', 'https://h/v1/a'));
          await run('gone', async () => (await httpCheck(fakeResponse(404, ''), 'DELETE', 'https://h/v1/a', { allow: [404] })).status);
          await run('notFound', () => httpCheck(fakeResponse(404, 'nope'), 'DELETE', 'https://h/v1/a'));
          await run('unauthorized', () => httpCheck(fakeResponse(401, 'who?'), 'GET'));
          await run('server', () => httpCheck(fakeResponse(502, 'bad gateway'), 'PUT', 'https://h/v1/a'));
          await run('brokenBody', () => httpCheck(fakeResponse(500, '', { broken: true }), 'PUT', 'https://h/v1/a'));
          // a URL fetch() cannot even parse: rejected before anything is sent
          await run('badUrl', () => httpFetch('not a url', { method: 'put' }));
          return { exports: out };
        })();
      }
      default: throw new Error(`unknown mode ${mode}`);
    }
  },
  // no delete: the helper's default
});
