#!/usr/bin/env node
"use strict";
/** `node bin/env.js NAME [--bind ADDR] [--curve-dir DIR] [--opt KEY=VALUE]...`: serve a JS environment. */
const { serveEnvironment, parseArgs } = require("../lib/environment");
const { GridWalk } = require("../envs/gridwalk");

const ENVIRONMENTS = { gridwalk: GridWalk };

async function main(argv) {
  const [name, ...rest] = argv;
  if (!(name in ENVIRONMENTS)) {
    process.stderr.write(`usage: env.js NAME [--bind ADDR | --connect ADDR] [--curve-dir DIR | ` +
      `--no-curve] [--idle-timeout-ms N] [--max-message-bytes N] [--opt KEY=VALUE]...\n` +
      `  NAME: ${Object.keys(ENVIRONMENTS).join(", ")}\n`);
    return 2;
  }
  let options;
  let env;
  try {
    options = parseArgs(rest);
    env = new ENVIRONMENTS[name](options.opts);
  } catch (err) {
    process.stderr.write(`rlbridge environment: ${err.message}\n`);
    return 2;
  }
  return serveEnvironment(env, options, `${name} (JavaScript)`, name);
}

main(process.argv.slice(2)).then((code) => { process.exitCode = code; }, (err) => {
  process.stderr.write(`rlbridge environment: ${err.stack || err}\n`);
  process.exitCode = 1;
});
