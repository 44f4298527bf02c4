// A Minecraft client for tests: logs in offline to HOST PORT, prints "spawned" once in the world,
// then one JSON line per block change it is sent ({"x","y","z","block"}); exits when stdin closes.
'use strict'

const mc = require('minecraft-protocol')
const [host, port, version] = [process.argv[2] || '127.0.0.1', Number(process.argv[3] || 25565), process.argv[4] || '1.21.4']
const registry = require('prismarine-registry')(version)

const client = mc.createClient({ host, port, username: 'rlbridge_watch', auth: 'offline', version })
const nameOf = state => (registry.blocksByStateId[state] || { name: `state_${state}` }).name
let spawned = false
client.on('position', () => {
  if (!spawned) console.log('spawned')
  spawned = true
})
client.on('block_change', packet => {
  const { x, y, z } = packet.location
  console.log(JSON.stringify({ x, y, z, block: 'minecraft:' + nameOf(packet.type) }))
})
client.on('error', err => { console.log(JSON.stringify({ error: err.message })); process.exit(1) })
client.on('end', () => process.exit(0))
process.stdin.resume()
process.stdin.on('end', () => { client.end(); process.exit(0) })
