"use strict";
/** What an agent needs from an RL-Glue 3.0 task spec (PROTOCOL.md section 4), and a seeded RNG. */

function parseBound(text) {
  if (text === "NEGINF") return -Infinity;
  if (text === "POSINF") return Infinity;
  if (text === "UNSPEC") return NaN;
  return Number(text);
}

function parseRanges(section) {
  const ranges = [];
  for (const match of section.matchAll(/\(([^)]*)\)/g)) {
    const parts = match[1].trim().split(/\s+/).map(parseBound);
    const [count, low, high] = parts.length === 3 ? parts : [1, ...parts];
    for (let i = 0; i < count; i++) ranges.push([low, high]);
  }
  return ranges;
}

/**
 * {actionInts: [[low, high], ...], observationInts: [...], legalMask: index|null, text}.
 */
function parseTaskSpec(text) {
  const actions = text.indexOf(" ACTIONS ");
  const rewards = text.indexOf(" REWARDS ", actions);
  if (actions < 0) throw new Error(`task spec has no ACTIONS section: ${text.slice(0, 200)}`);
  const section = (start, end) => {
    const part = text.slice(start, end < 0 ? undefined : end);
    const ints = part.match(/INTS((?:\s*\([^)]*\))+)/);
    return ints ? parseRanges(ints[1]) : [];
  };
  const extra = text.match(/EXTRA ARRAYS (\{.*?\})(?: |$)/);
  let legalMask = null;
  if (extra) {
    try {
      const arrays = JSON.parse(extra[1]);
      legalMask = Number.isInteger(arrays.legal_mask) ? arrays.legal_mask : null;
    } catch {
      legalMask = null;
    }
  }
  return {
    text,
    observationInts: section(text.indexOf(" OBSERVATIONS "), actions),
    actionInts: section(actions, rewards),
    legalMask,
  };
}

/** The legal action ints from the observation's legal mask, or null when the task has none. */
function legalActions(spec, observation) {
  if (spec.legalMask === null || spec.legalMask >= observation.arrays.length) return null;
  const low = spec.actionInts.length ? spec.actionInts[0][0] : 0;
  const mask = observation.arrays[spec.legalMask].data;
  const legal = [];
  for (let i = 0; i < mask.length; i++) if (mask[i]) legal.push(low + i);
  return legal;
}

/** mulberry32: a small seeded generator, so agents never use Math.random. */
class Rng {
  constructor(seed = 0) {
    this.seed(seed);
  }

  seed(seed) {
    this.state = Number(BigInt.asUintN(32, BigInt(seed)));
  }

  /** Uniform in [0, 1). */
  next() {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  below(n) {
    return Math.floor(this.next() * n);
  }
}

module.exports = { parseTaskSpec, legalActions, Rng };
