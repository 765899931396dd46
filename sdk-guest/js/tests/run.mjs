#!/usr/bin/env node
// Self-test of the JS guest helper, through real components: builds tests/edge-plugin.js
// (world deployer-plugin) and plugins/js/hold-hook (world hook-plugin) with componentize-js,
// runs them in node with `jco transpile` (jco ships with componentize-js) and the host imports
// mocked (tests/host-mock.js), and checks every WIT value the helper produces.
//
// Usage: node sdk-guest/js/tests/run.mjs [TOOLCHAIN_DIR]
//   (default: <repo>/target/guest-toolchains/js, as plugins/js/build.sh installs it)
// Also checks the HTTP helpers (targetUrl, the status and transport error mapping, httpCheck) on
// fake responses. Takes ~30 s (two componentize builds); prints one line per check, exits 1 on a failure.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const sdk = resolve(here, '..');
const repo = resolve(sdk, '../..');
const toolchain = resolve(process.argv[2] ?? join(repo, 'target/guest-toolchains/js'));
const work = mkdtempSync(join(tmpdir(), 'js-sdk-test-'));

function build(source, world, name) {
  const wasm = join(work, `${name}.wasm`);
  execFileSync(process.execPath, [join(sdk, 'componentize.mjs'), '--toolchain', toolchain, '--wit', join(repo, 'wit'),
    '--world', world, '--root', repo, source, wasm], { stdio: ['ignore', 'inherit', 'inherit'] });
  const imports = ['log', 'clock', 'progress', 'kubernetes', 'cluster', 'secondary-targets', 'fetch', 'ocm',
    'cluster-info'];
  const maps = imports.flatMap((i) => ['--map',
    `wasm-deployer:plugin/${i}@1.5.0=../host-mock.js#${i.replace(/-(.)/g, (_, c) => c.toUpperCase())}`]);
  execFileSync(join(toolchain, 'node_modules/.bin/jco'),
    ['transpile', wasm, '-o', join(work, name), '--name', name, '--no-typescript', '--quiet', ...maps],
    { stdio: ['ignore', 'ignore', 'inherit'] });
  return import(pathToFileURL(join(work, name, `${name}.js`)).href);
}

let failed = 0;
function check(name, f) {
  try {
    f();
    console.log(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}\n${e.stack ?? e}`);
  }
}

try {
  copyFileSync(join(here, 'host-mock.js'), join(work, 'host-mock.js'));
  writeFileSync(join(work, 'package.json'), '{"type":"module"}\n');
  symlinkSync(join(toolchain, 'node_modules'), join(work, 'node_modules')); // preview2-shim for WASI
  const mock = await import(pathToFileURL(join(work, 'host-mock.js')).href);
  const { deployer } = await build(join(here, 'edge-plugin.js'), 'deployer-plugin', 'edge');
  const { hooks } = await build(join(repo, 'plugins/js/hold-hook/plugin.js'), 'hook-plugin', 'hook');

  const item = (config, extra = {}) => ({
    deployItem: JSON.stringify({ metadata: { name: 'i', namespace: 'ns' }, spec: { type: 'test/edge', config }, ...extra }),
    target: undefined, context: undefined, previousProviderStatus: undefined,
  });
  const rec = (mode, config = {}) => deployer.reconcile(item({ mode, ...config }));
  // jco throws a ComponentError whose `payload` is the deployer-error record.
  const err = (f) => {
    try {
      f();
    } catch (e) {
      assert.ok(e.payload, `expected an err result, got ${e}`);
      return e.payload;
    }
    assert.fail('expected an err result');
  };
  const internal = (f, includes) => {
    const e = err(f);
    assert.deepEqual(e.codes, ['ERR_INTERNAL_PROBLEM']);
    assert.equal(e.operation, 'reconcile');
    assert.deepEqual(e.conditions, []);
    for (const s of [].concat(includes ?? [])) assert.ok(e.message.includes(s), `${JSON.stringify(e.message)} lacks ${s}`);
    return e;
  };

  check('describe fills missing lists', () =>
    assert.deepEqual(deployer.describe(), { name: 'edge', version: '0.0.1', deployItemTypes: ['test/edge'], hookTypes: [] }));
  check('undefined response -> every field empty', () => assert.deepEqual(rec('empty'),
    { phase: undefined, providerStatus: undefined, exports: undefined, conditions: [], retryAfterMs: undefined }));
  check('full response', () => {
    mock.calls.length = 0;
    assert.deepEqual(rec('full'), {
      phase: 'Progressing', providerStatus: '{"apiVersion":"x/v1","kind":"S","n":1}', exports: '{"already":"json"}',
      conditions: [
        { type: 'Ready', status: 'false', reason: 'Waiting', message: 'not yet', codes: [] },
        { type: 'T', status: 'progressing', reason: '', message: '', codes: [] },
      ],
      retryAfterMs: 1500n,
    });
    assert.deepEqual(mock.calls, [['checkpoint', 'full']]);
  });
  check('retryAfterMs BigInt', () => assert.equal(rec('bigint-retry').retryAfterMs, 7n));
  check('default delete', () => assert.equal(deployer.delete(item({ mode: 'x' })).phase, undefined));
  check('missing provider config', () => {
    const e = err(() => deployer.reconcile(item(undefined)));
    assert.deepEqual(e, { codes: ['ERR_CONFIGURATION_PROBLEM'], operation: 'reconcile',
      reason: 'ProviderConfigurationMissing', message: 'provider configuration missing', conditions: [] });
  });
  check('missing field', () => assert.equal(err(() => deployer.reconcile(item({ x: 1 }))).message,
    'spec.config.mode: required string is missing'));
  check('wrong type', () => assert.equal(err(() => rec('wrong-type', { n: 1.5 })).message,
    'spec.config.n: expected a integer, got number'));
  check('throw string', () => assert.equal(internal(() => rec('throw-string')).message, 'plain string'));
  check('throw number', () => internal(() => rec('throw-number'), '42'));
  check('throw object', () => internal(() => rec('throw-object'), '{"some":"thing"}'));
  check('throw null', () => internal(() => rec('throw-null'), 'null'));
  check('throw TypeError', () => assert.equal(internal(() => rec('throw-typeerror'), 'TypeError').reason, 'UncaughtException'));
  check('throw a WIT record', () => assert.deepEqual(err(() => rec('throw-record')),
    { codes: ['ERR_TIMEOUT'], operation: 'reconcile', reason: 'R', message: 'record thrown', conditions: [] }));
  check('DeployerError keeps everything', () => assert.deepEqual(err(() => rec('deployer-error')), {
    codes: ['ERR_UNAUTHORIZED'], operation: 'Op', reason: 'Custom', message: 'custom',
    conditions: [{ type: 'C', status: 'true', reason: 'R', message: 'm', codes: ['ERR_X'] }],
  }));
  check('RetryableError has no codes', () => assert.deepEqual(err(() => rec('retryable')).codes, []));
  check('ConfigurationError', () => assert.deepEqual(err(() => rec('config-error')), { codes: ['ERR_CONFIGURATION_PROBLEM'],
    operation: 'reconcile', reason: 'ConfigurationInvalid', message: 'bad thing', conditions: [] }));
  check('bad condition status -> err, no trap', () => internal(() => rec('bad-status'), 'maybe'));
  check('exports string not JSON -> err', () => internal(() => rec('bad-exports'), 'not JSON'));
  check('negative retryAfterMs -> err', () => internal(() => rec('bad-retry'), 'retryAfterMs'));
  check('non-object return -> err', () => internal(() => rec('bad-return'), 'response object'));
  check('bad condition in a thrown error -> err', () => internal(() => rec('bad-error-condition'), 'nope'));
  check('async handler', () => assert.equal(rec('async').phase, 'Succeeded'));
  check('async rejection', () => internal(() => rec('async-throw'), 'async boom'));
  check('import error -> DeployerError with its codes', () => {
    const e = { codes: ['ERR_UNAUTHORIZED'], operation: 'kubernetes', reason: 'Forbidden', message: 'no', conditions: [] };
    mock.fail.set('get', e);
    try {
      assert.deepEqual(err(() => rec('k8s-error')), e);
    } finally {
      mock.fail.clear();
    }
  });
  check('k8s ops convert objects and refs', () => {
    mock.calls.length = 0;
    Object.assign(mock.answers, {
      get: undefined, create: '{"kind":"ConfigMap","metadata":{"name":"a","uid":"u"}}', delete: false,
      list: '{"items":[{"kind":"ConfigMap"}]}', patch: '{"data":{"b":"1"}}',
      discover: { apiVersion: 'v1', kind: 'ConfigMap', plural: 'configmaps', namespaced: true },
      'secondary.get': '{"kind":"Secret"}',
    });
    const out = JSON.parse(rec('k8s-ops').exports);
    assert.deepEqual(out, {
      created: { kind: 'ConfigMap', metadata: { name: 'a', uid: 'u' } }, gone: false, items: [{ kind: 'ConfigMap' }],
      patched: { data: { b: '1' } }, info: { apiVersion: 'v1', kind: 'ConfigMap', plural: 'configmaps', namespaced: true },
      sec: { kind: 'Secret' }, remaining: 1234, now: '2026-01-01T00:00:00.000Z', rfc: '2026-01-01T00:00:00Z', mono: '5',
    });
    assert.deepEqual(mock.calls, [
      ['get', { apiVersion: 'v1', kind: 'ConfigMap', namespace: 'ns', name: 'a' }],
      ['create', '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}'],
      ['delete', { apiVersion: 'v1', kind: 'Namespace', namespace: undefined, name: 'n' }],
      ['list', 'v1', 'ConfigMap', 'ns', undefined],
      ['patch', { apiVersion: 'v1', kind: 'ConfigMap', namespace: 'ns', name: 'a' }, '{"data":{"b":"1"}}',
        { patchType: 'apply', fieldManager: 'edge', force: false }],
      ['discover', 'v1', 'ConfigMap'],
      ['secondary.get', 'other', { apiVersion: 'v1', kind: 'Secret', namespace: 'ns', name: 's' }],
    ]);
  });
  check('invocation fields and typed config', () => {
    const inv = item({ mode: 'config-types', n: 2.5, i: 3, nested: { deep: 'x' } }, { status: { phase: 'Init' } });
    inv.target = { target: '{"kind":"Target"}', content: 'not json' };
    inv.context = '{"kind":"Context"}';
    inv.previousProviderStatus = '{"kind":"S"}';
    assert.deepEqual(JSON.parse(deployer.reconcile(inv).exports), {
      n: 2.5, i: 3, d: 'x', dflt: true, target: { kind: 'Target' }, content: 'not json',
      context: { kind: 'Context' }, prev: { kind: 'S' }, phase: 'Init',
    });
  });
  // ---- HTTP helpers (WIT 1.5) ----
  const httpItem = (mode, path, target) => {
    const inv = item({ mode, ...(path === undefined ? {} : { path }) });
    if (target) inv.target = { target: JSON.stringify(target.object), content: target.content };
    return JSON.parse(deployer.reconcile(inv).exports);
  };
  const apiTarget = (content, type = 'wasm-deployer.dev/http-api') =>
    ({ object: { kind: 'Target', metadata: { name: 'api' }, spec: { type } }, content });
  const cfg = (reason, message) => ({ name: 'ConfigurationError', codes: ['ERR_CONFIGURATION_PROBLEM'], reason, message });
  check('http: joinUrl', () => assert.deepEqual(httpItem('http-url', 'a').joined,
    ['https://h/v1/things/a', 'https://h/v1/things/a', 'https://h/v1/a?x=1', 'https://h/v1']));
  check('http: targetUrl under the Target url', () => {
    for (const base of ['https://h/v1', 'https://h/v1/']) {
      for (const path of ['things/a', '/things/a']) {
        const out = httpItem('http-url', path, apiTarget(JSON.stringify({ url: base })));
        assert.deepEqual([out.url, out.method, out.base],
          [{ ok: 'https://h/v1/things/a' }, { ok: 'https://h/v1/x/y' }, { ok: base }]);
      }
    }
  });
  check('http: bad paths', () => {
    const t = apiTarget('{"url":"https://h/v1/"}');
    assert.deepEqual(httpItem('http-url', 'https://evil/x', t).url,
      cfg('InvalidPath', 'path "https://evil/x" is an absolute URL; it must be relative to the Target\'s url'));
    assert.deepEqual(httpItem('http-url', '//evil/x', t).url.reason, 'InvalidPath');
    assert.deepEqual(httpItem('http-url', 'a/../../x', t).url,
      cfg('InvalidPath', 'path "a/../../x" contains ".."; it must stay under the Target\'s url'));
    assert.deepEqual(httpItem('http-url', 'a/%2E%2e/x', t).url.reason, 'InvalidPath');
    assert.deepEqual(httpItem('http-url', 'a..b/x?q=..', t).url, { ok: 'https://h/v1/a..b/x?q=..' });
    assert.deepEqual(httpItem('http-url', 7, t).url, cfg('InvalidPath', 'path must be a string, got integer'));
  });
  check('http: bad Targets', () => {
    assert.deepEqual(httpItem('http-url', 'a').url,
      cfg('NoTarget', 'no target defined: the DeployItem needs a Target of type wasm-deployer.dev/http-api'));
    assert.deepEqual(httpItem('http-url', 'a', apiTarget('{"url":"https://h"}', 'landscaper.gardener.cloud/kubernetes-cluster')).url,
      cfg('TargetType', 'Target "api" has type "landscaper.gardener.cloud/kubernetes-cluster"; HTTP requests need a Target of type "wasm-deployer.dev/http-api"'));
    assert.deepEqual(httpItem('http-url', 'a', apiTarget('{}')).url, cfg('TargetUrl', 'Target "api" has no url (spec.config.url)'));
    assert.deepEqual(httpItem('http-url', 'a', apiTarget('{"url":""}')).url,
      cfg('TargetUrl', 'Target "api": spec.config.url must be a non-empty string'));
    assert.deepEqual(httpItem('http-url', 'a', apiTarget('{"url":"ftp://h/"}')).url,
      cfg('TargetUrl', 'Target "api": url "ftp://h/" is not an http:// or https:// URL'));
    assert.deepEqual(httpItem('http-url', 'a', apiTarget('not json')).url.reason, 'TargetUrl');
  });
  check('http: status mapping', () => {
    const m = httpItem('http-map', 'a');
    const rec = (name, codes, reason, message) => ({ name, codes, reason, message });
    assert.deepEqual(m.statuses, [
      null, null,
      rec('UnauthorizedError', ['ERR_UNAUTHORIZED'], 'Unauthorized', 'PUT https://h/v1/a: 401 no'),
      rec('UnauthorizedError', ['ERR_UNAUTHORIZED'], 'Unauthorized', 'PUT https://h/v1/a: 403 denied'),
      rec('ConfigurationError', ['ERR_CONFIGURATION_PROBLEM'], 'HttpClientError', `PUT https://h/v1/a: 404 ${'x'.repeat(500)}...`),
      rec('ConfigurationError', ['ERR_CONFIGURATION_PROBLEM'], 'HttpClientError', 'PUT https://h/v1/a: 409'),
      rec('RetryableError', [], 'HttpServerError', 'PUT https://h/v1/a: 500 boom'),
      rec('RetryableError', [], 'HttpServerError', 'PUT https://h/v1/a: 503'),
    ]);
  });
  check('http: transport mapping', () => {
    const m = httpItem('http-map', 'a');
    assert.deepEqual(m.refused, { name: 'RetryableError', codes: [], reason: 'HttpRequestFailed',
      message: 'GET https://h/x: TypeError: NetworkError when attempting to fetch resource' });
    assert.deepEqual([m.denied.codes, m.denied.reason], [['ERR_CONFIGURATION_PROBLEM'], 'HttpNotAllowed']);
    assert.ok(m.denied.message.startsWith('GET https://e/x: not allowed by the host'), m.denied.message);
    assert.deepEqual(m.passthrough, cfg('ConfigurationInvalid', 'mine'));
    assert.deepEqual(m.thrownString, { name: 'RetryableError', codes: [], reason: 'HttpRequestFailed',
      message: 'DELETE https://h/x: timeout' });
  });
  check('http: httpCheck, jsonOrNull, httpFetch', () => {
    const c = httpItem('http-check', 'a');
    const rec = (name, codes, reason, message) => ({ name, codes, reason, message });
    assert.deepEqual(c.ok, 201);
    assert.deepEqual([c.json, c.empty, c.notJson], [{ a: 1 }, null, null]);
    assert.deepEqual(c.brokenJson, rec('RetryableError', [], 'HttpRequestFailed', 'PUT https://h/v1/a: TypeError: body broke off'));
    assert.deepEqual(c.gone, 404);
    assert.deepEqual(c.notFound, rec('ConfigurationError', ['ERR_CONFIGURATION_PROBLEM'], 'HttpClientError',
      'DELETE https://h/v1/a: 404 nope'));
    assert.deepEqual(c.unauthorized, rec('UnauthorizedError', ['ERR_UNAUTHORIZED'], 'Unauthorized', 'GET https://h/v1/r: 401 who?'));
    assert.deepEqual(c.server, rec('RetryableError', [], 'HttpServerError', 'PUT https://h/v1/a: 502 bad gateway'));
    assert.deepEqual(c.brokenBody, rec('RetryableError', [], 'HttpRequestFailed', 'PUT https://h/v1/a: TypeError: body broke off'));
    assert.equal(c.badUrl.reason, 'HttpRequestFailed');
    assert.ok(c.badUrl.message.startsWith('PUT not a url: '), c.badUrl.message);
  });
  check('host JSON that does not parse -> ERR_INTERNAL_PROBLEM', () => {
    const e = err(() => deployer.reconcile({ deployItem: '{', target: undefined, context: undefined, previousProviderStatus: undefined }));
    assert.equal(e.reason, 'InvalidHostInput');
  });

  const hookIn = (annotations, hookType = 'before-reconcile') => ({
    hookType, deployItem: JSON.stringify({ metadata: { name: 'h', namespace: 'ns', annotations } }), target: undefined,
  });
  check('hook describe', () =>
    assert.deepEqual(hooks.describe(), { name: 'js-hold-hook', version: '0.1.0', hookTypes: ['before-reconcile'] }));
  check('hook holds an annotated item', () => {
    mock.calls.length = 0;
    assert.deepEqual(hooks.run(hookIn({ 'examples.wasm-deployer.dev/hold': 'true' })),
      { abortReconcile: true, requeue: false, requeueAfterMs: 1000n });
    assert.deepEqual(mock.calls, [['log', 'info', 'holding h']]);
  });
  check('hook: no opinion otherwise', () => {
    assert.equal(hooks.run(hookIn({})), undefined);
    assert.equal(hooks.run(hookIn({ 'examples.wasm-deployer.dev/hold': 'false' })), undefined);
  });
  check('hook: bad input -> err with the hook type as operation', () => {
    const e = err(() => hooks.run({ hookType: 'before-reconcile', deployItem: '{', target: undefined }));
    assert.deepEqual([e.codes, e.operation, e.reason], [['ERR_INTERNAL_PROBLEM'], 'BeforeReconcile', 'InvalidHostInput']);
  });
} finally {
  rmSync(work, { recursive: true, force: true });
}
if (failed) {
  console.log(`${failed} check(s) failed`);
  process.exit(1);
}
console.log('all checks passed');
