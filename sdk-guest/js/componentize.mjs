#!/usr/bin/env node
// Build one JS plugin into a WASI 0.2 component with the componentize-js API
// (`jco componentize` cannot read the WIT directory here: "failed to get path metadata").
//
// Usage:
//   node componentize.mjs --toolchain DIR --wit DIR --world WORLD [--root DIR] SOURCE.js OUT.wasm
//
//   --toolchain  directory whose node_modules holds @bytecodealliance/componentize-js
//                (plugins/js/build.sh uses <repo>/target/guest-toolchains/js)
//   --wit        the WIT directory (<repo>/wit)
//   --world      deployer-plugin | hook-plugin | deployer-hook-plugin
//   --root       the directory the module loader sees as its root (default: the current
//                directory). Every module SOURCE imports by relative path (the helper
//                wasm-deployer.js, hooks.js, common.js) must be inside it: componentize-js maps
//                only this directory into the build sandbox.
//
// Features: `fetch-event` is disabled (a plugin serves no requests). `http` (the global `fetch()`
// over wasi:http/outgoing-handler) is enabled for the worlds that import wasi:http —
// deployer-plugin and deployer-hook-plugin — and disabled for hook-plugin, so a hook imports only
// wasi:cli/io/clocks/filesystem/random (the host grants no files, sockets or environment).

import { readFile, rename, writeFile } from 'node:fs/promises';
import { dirname, join, relative, resolve, isAbsolute } from 'node:path';
import { pathToFileURL } from 'node:url';

function usage(msg) {
  if (msg) console.error(`componentize.mjs: ${msg}`);
  console.error('usage: node componentize.mjs --toolchain DIR --wit DIR --world WORLD [--root DIR] SOURCE.js OUT.wasm');
  process.exit(2);
}

const opts = {};
const positional = [];
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a.startsWith('--')) {
    if (i + 1 >= argv.length) usage(`${a} needs a value`);
    opts[a.slice(2)] = argv[++i];
  } else {
    positional.push(a);
  }
}
if (positional.length !== 2) usage('need SOURCE.js and OUT.wasm');
for (const k of ['toolchain', 'wit', 'world']) if (!opts[k]) usage(`--${k} is required`);

const [source, out] = positional.map((p) => resolve(p));
const root = resolve(opts.root ?? process.cwd());
const wit = resolve(opts.wit); // before the chdir below: a relative --wit is relative to the caller
const rel = relative(root, source);
if (rel.startsWith('..') || isAbsolute(rel)) usage(`${source} is not inside --root ${root}`);

// Load componentize-js from the toolchain directory (its package only has an `import` export).
const pkgDir = join(resolve(opts.toolchain), 'node_modules', '@bytecodealliance', 'componentize-js');
let pkg;
try {
  pkg = JSON.parse(await readFile(join(pkgDir, 'package.json'), 'utf8'));
} catch (e) {
  usage(`no @bytecodealliance/componentize-js under ${opts.toolchain} (${e.code ?? e.message})`);
}
const entry = typeof pkg.exports === 'object' ? pkg.exports.import : pkg.main;
const { componentize } = await import(pathToFileURL(join(pkgDir, entry)).href);

// componentize-js only says "failed to parse JS source, encountered [N] errors" for a syntax
// error in SOURCE; parse it first with its own parser (oxc) to show where.
try {
  const oxcEntry = join(resolve(opts.toolchain), 'node_modules', 'oxc-parser', 'index.js');
  const oxc = (await import(pathToFileURL(oxcEntry).href)).default;
  const { errors } = await oxc.parseAsync(rel, await readFile(source, 'utf8'));
  if (errors?.length) {
    for (const e of errors) console.error(e.codeframe ?? e.message);
    console.error(`componentize.mjs: ${rel}: ${errors.length} syntax error(s)`);
    process.exit(1);
  }
} catch (e) {
  if (e?.code !== 'ERR_MODULE_NOT_FOUND') throw e; // no oxc-parser: componentize-js reports it
}

// The worlds that import wasi:http/outgoing-handler (WIT 1.5): there `fetch()` works.
const HTTP_WORLDS = new Set(['deployer-plugin', 'deployer-hook-plugin']);

// componentize-js maps the current directory as the sandbox root when SOURCE is below it.
process.chdir(root);
const { component } = await componentize({
  sourcePath: source, // absolute and below the cwd: the cwd becomes the sandbox root
  witPath: wit,
  worldName: opts.world,
  disableFeatures: HTTP_WORLDS.has(opts.world) ? ['fetch-event'] : ['http', 'fetch-event'],
});

// Write atomically: a failed or interrupted build never leaves a half-written OUT.
const tmp = join(dirname(out), `.${process.pid}.tmp.wasm`);
await writeFile(tmp, component);
await rename(tmp, out);
