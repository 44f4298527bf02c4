"use strict";
/**
 * CURVE for the agent server: the server keys and authorized client keys of a directory made
 * by `rlbridge keys DIR`, and a ZAP handler (RFC 27) that refuses, and logs, unknown clients.
 */
const fs = require("node:fs");
const path = require("node:path");

function log(text) {
  process.stderr.write(`rlbridge agent: ${text}\n`);
}

const Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

function z85Encode(bytes) {
  let out = "";
  for (let i = 0; i < bytes.length; i += 4) {
    let value = ((bytes[i] << 24) >>> 0) + (bytes[i + 1] << 16) + (bytes[i + 2] << 8) + bytes[i + 3];
    let chunk = "";
    for (let k = 0; k < 5; k++) {
      chunk = Z85[value % 85] + chunk;
      value = Math.floor(value / 85);
    }
    out += chunk;
  }
  return out;
}

/** A key (Z85) from a ZeroMQ certificate file: `public-key = "..."` or `secret-key = "..."`. */
function readKey(file, field) {
  const match = fs.readFileSync(file, "utf8").match(new RegExp(`${field}\\s*=\\s*"([^"]{40})"`));
  if (!match) throw new Error(`${file} has no ${field}`);
  return match[1];
}

/** Keys that must not be used; its message is the one line the server prints. */
class CurveError extends Error {}

function loadCurve(directory) {
  const secretFile = path.join(directory, "server.key_secret");
  // A secret key others can read is no secret: refused as the Python side refuses it
  // (rlbridge/experiment/net/curve.py, check_private), in the same words.
  const mode = fs.existsSync(secretFile) ? fs.statSync(secretFile).mode & 0o7777 : 0;
  if (mode & 0o077) {
    throw new CurveError(`a CURVE secret key must be readable by its owner only, but ${secretFile} ` +
      `has mode ${mode.toString(8).padStart(4, "0")}: \`chmod 600 ${secretFile}\`, and make new ` +
      `keys with \`rlbridge keys ${directory} --force\` if others may have read it`);
  }
  const authorizedDir = path.join(directory, "authorized_clients");
  const authorized = new Set(fs.readdirSync(authorizedDir)
    .filter((name) => name.endsWith(".key"))
    .map((name) => readKey(path.join(authorizedDir, name), "public-key")));
  return {
    publicKey: readKey(secretFile, "public-key"),
    secretKey: readKey(secretFile, "secret-key"),
    authorized,
  };
}

/** Answer ZAP requests (RFC 27) for this process's context: allow authorized client keys. */
async function runZap(zap, authorized) {
  for await (const frames of zap) {
    const [version, requestId, , address, , mechanism, key] = frames;
    const mechanismName = mechanism ? mechanism.toString() : "";
    const clientKey = key && key.length === 32 ? z85Encode(key) : "";
    const allowed = mechanismName === "CURVE" && authorized.has(clientKey);
    if (!allowed) {
      log(`refused a ${mechanismName} client from ${address}: its public key ` +
        `${clientKey || "(none)"} is not in authorized_clients`);
    }
    await zap.send([version, requestId, allowed ? "200" : "400",
      allowed ? "OK" : "client key not authorized", allowed ? clientKey : "", ""]);
  }
}

module.exports = { CurveError, loadCurve, runZap, z85Encode };
