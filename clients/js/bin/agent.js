#!/usr/bin/env node
"use strict";
/** `node bin/agent.js NAME [--bind ADDR] [--curve-dir DIR] [--opt KEY=VALUE]...`: serve a JS agent. */
const { serve, parseArgs } = require("../lib/server");
const { RandomAgent } = require("../agents/random");
const { FirstAgent } = require("../agents/first");
const { QLearningAgent } = require("../agents/qlearning");

const AGENTS = { random: RandomAgent, first: FirstAgent, qlearning: QLearningAgent };

async function main(argv) {
  const [name, ...rest] = argv;
  if (!(name in AGENTS)) {
    process.stderr.write(`usage: agent.js NAME [--bind ADDR | --connect ADDR] [--curve-dir DIR | ` +
      `--no-curve] [--idle-timeout-ms N] [--opt KEY=VALUE]...\n  NAME: ${Object.keys(AGENTS).join(", ")}\n`);
    return 2;
  }
  let options;
  let agent;
  try {
    options = parseArgs(rest);
    agent = new AGENTS[name](options.opts);  // a bad option, or a load= file it refuses
  } catch (err) {
    process.stderr.write(`rlbridge agent: ${err.message}\n`);
    return 2;
  }
  return serve(agent, options, `${name} (JavaScript)`, name);
}

main(process.argv.slice(2)).then((code) => { process.exitCode = code; }, (err) => {
  process.stderr.write(`rlbridge agent: ${err.stack || err}\n`);
  process.exitCode = 1;
});
