"use strict";
/**
 * GridWalk in JavaScript: the rules and task spec of rlbridge/games/toy/env.py's GridWalk,
 * so that the same actions give the same observations and rewards in either language. A walker
 * starts at (0, 0) of a size x size grid and must reach the far corner; actions 0-3 move up,
 * down, left, right (into a wall: stays); -1 per step, 0 on reaching the goal, which ends the
 * episode. The observation is a size x size int8 array: 1 the walker, 2 the goal, 0 empty.
 */
const { Environment, invalidAction } = require("../lib/environment");

const MOVES = [[-1, 0], [1, 0], [0, -1], [0, 1]];

class GridWalk extends Environment {
  constructor(options = {}) {
    super();
    const size = options.size === undefined ? 4 : Number(options.size);
    if (!Number.isInteger(size) || size < 2 || size > 64) {
      throw new Error(`gridwalk option size must be an int from 2 to 64; got '${options.size}'`);
    }
    const unknown = Object.keys(options).filter((key) => key !== "size");
    if (unknown.length) {
      throw new Error(`gridwalk takes the option size; got ${unknown.join(", ")}`);
    }
    this.size = size;
    this.row = 0;
    this.col = 0;
  }

  envInit() {
    const cells = this.size * this.size;
    return "VERSION RL-Glue-3.0 PROBLEMTYPE episodic DISCOUNTFACTOR 1 " +
      `OBSERVATIONS INTS (${cells} 0 2) ACTIONS INTS (0 3) REWARDS (-1.0 0.0) ` +
      `EXTRA ARRAYS {"observations":[["|i1",[${this.size},${this.size}]]]}`;
  }

  observation() {
    const board = new Uint8Array(this.size * this.size);
    board[board.length - 1] = 2;
    board[this.row * this.size + this.col] = 1;
    return { arrays: [{ dtype: "|i1", shape: [this.size, this.size], data: board }] };
  }

  envStart() {
    this.row = 0;
    this.col = 0;
    return this.observation();
  }

  envStep(action) {
    const move = action.ints.length === 1 ? action.ints[0] : -1;
    if (!(move >= 0 && move <= 3)) {
      throw invalidAction(`gridwalk action must be an int in [0, 3]; got [${action.ints}]`);
    }
    const [dRow, dCol] = MOVES[move];
    this.row = Math.min(Math.max(this.row + dRow, 0), this.size - 1);
    this.col = Math.min(Math.max(this.col + dCol, 0), this.size - 1);
    const done = this.row === this.size - 1 && this.col === this.size - 1;
    return { reward: done ? 0.0 : -1.0, observation: this.observation(), terminal: done };
  }
}

module.exports = { GridWalk };
