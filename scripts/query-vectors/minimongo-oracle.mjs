#!/usr/bin/env node
// ddp-bridge: scripts/query-vectors/minimongo-oracle.mjs
//
// Our own loader code; it contains none of Meteor's code. It loads an
// unmodified checkout of meteor/meteor, given with --meteor DIR (any tree
// holding packages/minimongo, packages/ejson, etc., as listed below), and runs
// Minimongo's find().fetch() for each query. The vectors in
// Tests/BridgeTests/Fixtures/minimongo-vectors.json were recorded with meteor/meteor
// at commit 024061123a49ff1d4b89d69453ec9263ef8599e1 (release/METEOR@3.0.4,
// minimongo 2.0.1) under Node 20; see README.md here and generate.py.
//
// Differential-test oracle: runs Meteor's real client-side query engine
// (Minimongo, packages/minimongo in a meteor/meteor checkout) under plain
// Node 20, without the Meteor build tool and without npm packages.
//
// This file is only a loader/shim. Meteor's sources are read from the
// checkout given with --meteor and evaluated unchanged, except for one
// mechanical rewrite: Meteor's compiler (reify) allows `import` statements
// nested inside blocks (ejson.js does that for './stringify'); native ESM
// does not, so such nested default imports are hoisted to the top of the
// module.
//
// Usage:
//   node minimongo-oracle.mjs --meteor DIR INPUT.json [--out FILE] [--jsonl]
//
//   DIR    root of a meteor/meteor checkout (must contain packages/minimongo,
//          packages/ejson, packages/base64, packages/random,
//          packages/mongo-id, packages/diff-sequence, packages/id-map,
//          packages/ordered-dict, packages/geojson-utils, packages/tracker,
//          packages/meteor/fiber_stubs_client.js)
//   INPUT  {"documents": [EJSON doc, ...],
//           "queries": [{"selector": ..., "sort": ..., "skip": ...,
//                        "limit": ..., "fields": ...}, ...]}
//          ("-" reads stdin)
//
// Output (stdout unless --out):
//   default: one JSON object
//     {"meteor": {...source info...},
//      "insertErrors": [{"index": i, "_id": ..., "error": "..."}],
//      "answers": [{"documents": [EJSON doc, ...]} | {"error": "..."}, ...]}
//   --jsonl: one answer per line, in query order (insert errors go to stderr
//     as lines starting with "insert-error:"; exit status 3 if there were any).
//
// Semantics: documents are decoded with EJSON.fromJSONValue and inserted in
// the given order into `new LocalCollection()` (what Meteor's DDP client store
// does for `added` messages). Each query's selector is decoded with
// EJSON.fromJSONValue (so {"$date": ms} in a selector is a Date); sort, skip,
// limit and fields are passed through only when present and not null. The
// answer is `coll.find(selector, options).fetch()` mapped through
// EJSON.toJSONValue.

import { register, createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import vm from 'node:vm';

// ---------------------------------------------------------------- arguments
function usage(msg) {
  if (msg) process.stderr.write(`minimongo-oracle: ${msg}\n`);
  process.stderr.write(
    'usage: node minimongo-oracle.mjs --meteor DIR INPUT.json [--out FILE] [--jsonl]\n');
  process.exit(2);
}

const args = process.argv.slice(2);
let meteorDir = null, inputPath = null, outPath = null, jsonl = false;
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '--meteor') meteorDir = args[++i];
  else if (a.startsWith('--meteor=')) meteorDir = a.slice(9);
  else if (a === '--out') outPath = args[++i];
  else if (a.startsWith('--out=')) outPath = a.slice(6);
  else if (a === '--jsonl') jsonl = true;
  else if (a === '-h' || a === '--help') usage();
  else if (inputPath === null) inputPath = a;
  else usage(`unexpected argument ${a}`);
}
if (!meteorDir) usage('--meteor DIR is required');
if (!inputPath) usage('input file is required');

const packagesDir = path.resolve(meteorDir, 'packages');
if (!existsSync(path.join(packagesDir, 'minimongo', 'local_collection.js'))) {
  usage(`${packagesDir}/minimongo/local_collection.js not found`);
}
const pkgFile = rel => path.join(packagesDir, rel);

// Main modules of the Meteor packages reachable through `meteor/<name>`
// imports (from each package.js: api.mainModule; server flavour for random,
// client flavour for minimongo).
const MAIN_MODULES = {
  base64: 'base64/base64.js',
  ejson: 'ejson/ejson.js',
  random: 'random/main_server.js',
  'mongo-id': 'mongo-id/id.js',
  'diff-sequence': 'diff-sequence/diff.js',
  'id-map': 'id-map/id-map.js',
  'ordered-dict': 'ordered-dict/ordered_dict.js',
  minimongo: 'minimongo/minimongo_client.js',
};

// ------------------------------------------------------------ module hooks
// Runs on the loader thread. Resolves `meteor/<pkg>` to the package's main
// module (`meteor/meteor` to a shim re-exporting globalThis.Meteor), resolves
// extension-less relative imports inside the checkout to `.js`, and loads
// checkout files as ES modules (there is no package.json with "type":
// "module" in the tree).
const HOOKS = `
import { readFile } from 'node:fs/promises';
let root = null, mains = {};
export async function initialize(data) { root = data.root; mains = data.mains; }
const inTree = url => root !== null && url.startsWith(root) &&
  !url.startsWith(root + 'geojson-utils/');   // geojson-utils is CommonJS
export async function resolve(specifier, context, next) {
  if (specifier.startsWith('meteor/')) {
    const name = specifier.slice('meteor/'.length);
    if (name === 'meteor') {
      return { url: 'data:text/javascript,export%20const%20Meteor%20%3D%20globalThis.Meteor%3B',
               shortCircuit: true };
    }
    if (!Object.prototype.hasOwnProperty.call(mains, name)) {
      throw new Error('minimongo-oracle: no mapping for ' + specifier);
    }
    return { url: new URL(mains[name], root).href, shortCircuit: true };
  }
  if (context.parentURL && inTree(context.parentURL) &&
      (specifier.startsWith('./') || specifier.startsWith('../'))) {
    let url = new URL(specifier, context.parentURL);
    if (!/\\.(m?js|json)$/.test(url.pathname)) url = new URL(url.href + '.js');
    return { url: url.href, shortCircuit: true };
  }
  return next(specifier, context);
}
export async function load(url, context, next) {
  if (inTree(url) && url.endsWith('.js')) {
    let source = await readFile(new URL(url), 'utf8');
    const hoisted = [];
    source = source.replace(
      /^([ \\t]+)import[ \\t]+([A-Za-z_$][\\w$]*)[ \\t]+from[ \\t]+(['"][^'"]+['"])[ \\t]*;?[ \\t]*$/gm,
      (m, indent, name, spec) => {
        hoisted.push('import ' + name + ' from ' + spec + ';');
        return indent + '/* import hoisted by minimongo-oracle */';
      });
    // Prepend on the first line so that line numbers stay unchanged.
    return { format: 'module', source: hoisted.join(' ') + source, shortCircuit: true };
  }
  return next(url, context);
}
`;

register('data:text/javascript,' + encodeURIComponent(HOOKS), {
  data: { root: pathToFileURL(packagesDir + path.sep).href, mains: MAIN_MODULES },
});

// ------------------------------------------------------------ Meteor globals
// In a Meteor app, a package's dependencies' exports are package-scope
// variables; here they are globals. `Meteor` itself is a stub holding only
// what these packages touch, plus Meteor's real client fiber stubs
// (_SynchronousQueue, _noYieldsAllowed) from packages/meteor.
globalThis.Meteor = {
  isClient: true,
  isServer: false,
  isCordova: false,
  isModern: true,
  isProduction: false,
  isDevelopment: true,
  isTest: false,
  _debug: (...a) => console.error('Meteor._debug:', ...a),
  defer: f => setTimeout(f, 0),
  _setImmediate: f => setImmediate(f),
  _isPromise: r => !!r && typeof r.then === 'function',
  _suppressed_log_expected: () => false,
  _suppress_log: () => {},
  bindEnvironment: f => f,
};
globalThis.Package = {};

function runScript(rel) {
  const file = pkgFile(rel);
  vm.runInThisContext(readFileSync(file, 'utf8'), { filename: file });
}

// packages/meteor: the client flavour of the synchronous queue.
runScript('meteor/fiber_stubs_client.js');

const importPkg = name => import(`meteor/${name}`);

const { Base64 } = await importPkg('base64');
globalThis.Base64 = Base64;
Package.base64 = { Base64 };

const { EJSON } = await importPkg('ejson');
globalThis.EJSON = EJSON;
Package.ejson = { EJSON };

const { Random } = await importPkg('random');
globalThis.Random = Random;
Package.random = { Random };

const { MongoID } = await importPkg('mongo-id');
globalThis.MongoID = MongoID;
Package['mongo-id'] = { MongoID };

const { DiffSequence } = await importPkg('diff-sequence');
globalThis.DiffSequence = DiffSequence;
Package['diff-sequence'] = { DiffSequence };

const { IdMap } = await importPkg('id-map');
globalThis.IdMap = IdMap;
Package['id-map'] = { IdMap };

const { OrderedDict } = await importPkg('ordered-dict');
globalThis.OrderedDict = OrderedDict;
Package['ordered-dict'] = { OrderedDict };

const { GeoJSON } = createRequire(pkgFile('geojson-utils/main.js'))('./main.js');
globalThis.GeoJSON = GeoJSON;
Package['geojson-utils'] = { GeoJSON };

// tracker.js is a plain (non-module) script assigning the globals Tracker/Deps.
runScript('tracker/tracker.js');
Package.tracker = { Tracker: globalThis.Tracker, Deps: globalThis.Deps };

// Globals that minimongo assigns without declaring them (package-scope
// variables in Meteor); they must exist before the strict-mode modules run.
// 'mongo-decimal' is deliberately absent: it is a weak client dependency of
// minimongo and needs the decimal.js npm package, so matcher.js falls back to
// its DecimalStub, as on a client that does not use mongo-decimal.
for (const g of ['LocalCollection', 'Minimongo', 'MinimongoTest', 'MinimongoError']) {
  globalThis[g] = undefined;
}
await importPkg('minimongo');
const { LocalCollection, Minimongo } = globalThis;
Package.minimongo = { LocalCollection, Minimongo };

// ------------------------------------------------------------- source info
function sourceInfo() {
  const info = { packages: packagesDir };
  try {
    const v = readFileSync(pkgFile('minimongo/package.js'), 'utf8').match(/version:\s*["']([^"']+)/);
    if (v) info.minimongoVersion = v[1];
  } catch {}
  const commitFile = path.resolve(meteorDir, 'COMMIT');
  if (existsSync(commitFile)) {
    info.commit = readFileSync(commitFile, 'utf8').split('\n')[0].trim();
  } else {
    try {
      info.commit = execFileSync('git', ['-C', meteorDir, 'rev-parse', 'HEAD'],
        { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    } catch {}
  }
  return info;
}

// -------------------------------------------------------------------- run
const errorMessage = e => (e && e.message !== undefined ? String(e.message) : String(e));

const input = JSON.parse(readFileSync(inputPath === '-' ? 0 : inputPath, 'utf8'));
const documents = input.documents || [];
const queries = input.queries || [];

const coll = new LocalCollection();
const insertErrors = [];
documents.forEach((raw, index) => {
  try {
    coll.insert(EJSON.fromJSONValue(raw));
  } catch (e) {
    insertErrors.push({ index, _id: raw && raw._id, error: errorMessage(e) });
  }
});

const OPTION_KEYS = ['sort', 'skip', 'limit', 'fields'];
const answers = queries.map(q => {
  try {
    const selector = Object.prototype.hasOwnProperty.call(q, 'selector')
      ? EJSON.fromJSONValue(q.selector)
      : {};
    const options = {};
    for (const k of OPTION_KEYS) {
      if (q[k] !== null && q[k] !== undefined) options[k] = q[k];
    }
    const docs = coll.find(selector, options).fetch();
    return { documents: docs.map(d => EJSON.toJSONValue(d)) };
  } catch (e) {
    return { error: errorMessage(e) };
  }
});

let text;
if (jsonl) {
  for (const e of insertErrors) process.stderr.write(`insert-error: ${JSON.stringify(e)}\n`);
  text = answers.map(a => JSON.stringify(a)).join('\n') + (answers.length ? '\n' : '');
} else {
  text = JSON.stringify({ meteor: sourceInfo(), insertErrors, answers }) + '\n';
}
if (outPath) writeFileSync(outPath, text);
else process.stdout.write(text);
if (jsonl && insertErrors.length) process.exitCode = 3;
