// RCON for flying-squid (it has none of its own): the Source RCON protocol as vanilla Minecraft
// speaks it, plus block commands that wait for the world write and `getblock` to read blocks back.
'use strict'

const net = require('net')
const { Vec3 } = require('vec3')

const AUTH = 3
const EXEC = 2
const AUTH_RESPONSE = 2
const RESPONSE_VALUE = 0
const MAX_REPLY_BODY = 4096 // vanilla splits longer replies over several packets
const MAX_REQUEST = 1460 // vanilla closes connections that send more than this per packet
const FILL_LIMIT = 32768 // vanilla's limit on the volume of one /fill
const GETBLOCKS_LIMIT = 4096

function encodePacket (id, type, body) {
  const payload = Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8')
  const packet = Buffer.alloc(14 + payload.length)
  packet.writeInt32LE(10 + payload.length, 0)
  packet.writeInt32LE(id, 4)
  packet.writeInt32LE(type, 8)
  payload.copy(packet, 12)
  return packet
}

function stripNamespace (name) {
  return name.startsWith('minecraft:') ? name.slice('minecraft:'.length) : name
}

function blockCommands (serv) {
  const registry = serv.registry
  const world = () => serv.overworld

  // Like serv.setBlock but without scheduling neighbour updates (nothing a board of wool needs,
  // and 5x the cost), and awaited: connected players still see the change.
  async function place (position, state) {
    const target = world()
    for (const player of serv.players) {
      if (player.world === target) player.sendBlock(position, state)
    }
    await target.setBlockStateId(position, state)
  }

  function stateOf (name) {
    const block = registry.blocksByName[stripNamespace(name)]
    if (!block) return undefined
    return block.defaultState ?? block.minStateId
  }

  function coordinates (words) {
    const numbers = words.map(w => Number(w))
    if (numbers.some(n => !Number.isInteger(n))) return undefined
    return numbers
  }

  async function setblock (args) {
    if (args.length < 4) return 'Usage: setblock <x> <y> <z> <block>'
    const xyz = coordinates(args.slice(0, 3))
    if (!xyz) return `Expected integer coordinates, got ${args.slice(0, 3).join(' ')}`
    const state = stateOf(args[3])
    if (state === undefined) return `Unknown block type '${args[3]}'`
    await place(new Vec3(...xyz), state)
    return `Changed the block at ${xyz.join(', ')}`
  }

  async function fill (args) {
    if (args.length < 7) return 'Usage: fill <x1> <y1> <z1> <x2> <y2> <z2> <block>'
    const xyz = coordinates(args.slice(0, 6))
    if (!xyz) return `Expected integer coordinates, got ${args.slice(0, 6).join(' ')}`
    const state = stateOf(args[6])
    if (state === undefined) return `Unknown block type '${args[6]}'`
    const [x1, y1, z1, x2, y2, z2] = xyz
    const lo = [Math.min(x1, x2), Math.min(y1, y2), Math.min(z1, z2)]
    const hi = [Math.max(x1, x2), Math.max(y1, y2), Math.max(z1, z2)]
    const volume = (hi[0] - lo[0] + 1) * (hi[1] - lo[1] + 1) * (hi[2] - lo[2] + 1)
    if (volume > FILL_LIMIT) return `Too many blocks in the specified area (maximum ${FILL_LIMIT}, specified ${volume})`
    // Load each chunk column once before writing: concurrent writes to a column not yet
    // loaded would each generate it (256 writes to a new chunk took 7 s instead of 0.1 s).
    for (let cx = lo[0] >> 4; cx <= hi[0] >> 4; cx++) {
      for (let cz = lo[2] >> 4; cz <= hi[2] >> 4; cz++) {
        await world().getBlockStateId(new Vec3(cx * 16, lo[1], cz * 16))
      }
    }
    const writes = []
    for (let x = lo[0]; x <= hi[0]; x++) {
      for (let y = lo[1]; y <= hi[1]; y++) {
        for (let z = lo[2]; z <= hi[2]; z++) writes.push(place(new Vec3(x, y, z), state))
      }
    }
    await Promise.all(writes)
    return `Successfully filled ${volume} block(s)`
  }

  async function getblock (args) {
    if (args.length !== 3) return 'Usage: getblock <x> <y> <z>'
    const xyz = coordinates(args)
    if (!xyz) return `Expected integer coordinates, got ${args.join(' ')}`
    const state = await world().getBlockStateId(new Vec3(...xyz))
    const block = registry.blocksByStateId[state]
    return `minecraft:${block ? block.name : 'unknown_state_' + state}`
  }

  // Not vanilla: a reply of N bytes (N <= 100000), to exercise replies split over packets.
  async function longreply (args) {
    const size = Math.min(100000, Math.max(1, Number(args[0]) | 0))
    // 'x' first, so that two-byte 'é's straddle the 4096-byte packet boundaries
    return 'x' + 'é'.repeat((size - 1) >> 1) + ((size - 1) & 1 ? 'y' : '')
  }

  // Not vanilla: the blocks of a box (at most GETBLOCKS_LIMIT), x fastest, then z, then y,
  // one name per block without its namespace, separated by spaces. Missions read their world
  // through it, one box per step instead of one round trip per block.
  async function getblocks (args) {
    if (args.length !== 6) return 'Usage: getblocks <x1> <y1> <z1> <x2> <y2> <z2>'
    const xyz = coordinates(args)
    if (!xyz) return `Expected integer coordinates, got ${args.join(' ')}`
    const [x1, y1, z1, x2, y2, z2] = xyz
    const volume = (Math.abs(x2 - x1) + 1) * (Math.abs(y2 - y1) + 1) * (Math.abs(z2 - z1) + 1)
    if (volume > GETBLOCKS_LIMIT) return `Too many blocks (maximum ${GETBLOCKS_LIMIT}, specified ${volume})`
    const names = []
    for (let y = Math.min(y1, y2); y <= Math.max(y1, y2); y++) {
      for (let z = Math.min(z1, z2); z <= Math.max(z1, z2); z++) {
        for (let x = Math.min(x1, x2); x <= Math.max(x1, x2); x++) {
          const state = await world().getBlockStateId(new Vec3(x, y, z))
          const block = registry.blocksByStateId[state]
          names.push(block ? block.name : 'unknown_state_' + state)
        }
      }
    }
    return names.join(' ')
  }

  // Not vanilla: the mission agent's body, a server-side entity that watchers see.
  // `body spawn X Y Z YAW` (replacing any earlier body), `body tp X Y Z YAW`, `body pos`
  // (the server's own record: "X Y Z YAW"), `body remove`. Its gravity is off: the mission
  // backend moves it one discrete command at a time, falls included.
  let body = null
  async function bodyCommand (args) {
    const [verb, ...rest] = args
    if (verb === 'pos') return body ? `${body.position.x} ${body.position.y} ${body.position.z} ${body.yaw}` : 'No body'
    if (verb === 'remove') {
      if (body) serv.destroyEntity(body)
      body = null
      return 'Removed the body'
    }
    if (verb !== 'spawn' && verb !== 'tp') return 'Usage: body spawn|tp <x> <y> <z> <yaw> | body pos | body remove'
    const numbers = rest.map(Number)
    if (numbers.length !== 4 || numbers.some(n => !Number.isFinite(n))) return `Expected x y z yaw, got ${rest.join(' ')}`
    const [x, y, z, yaw] = numbers
    if (verb === 'spawn' || !body) {
      if (body) serv.destroyEntity(body)
      const type = serv.registry.entitiesByName.snow_golem.id // among the mobs flying-squid spawns
      body = serv.spawnMob(type, world(), new Vec3(x, y, z), { yaw })
      body.gravity = new Vec3(0, 0, 0)
    } else {
      await body.sendPosition(new Vec3(x, y, z), true, true)
    }
    body.yaw = yaw
    return `Body at ${body.position.x} ${body.position.y} ${body.position.z} ${body.yaw}`
  }

  return { setblock, fill, getblock, getblocks, body: bodyCommand, longreply }
}

module.exports.server = function (serv, serverSettings) {
  // flying-squid passes the server's settings; this plugin's own are on `this.settings`
  const settings = (this && this.settings) || serverSettings.rcon || {}
  const port = Number(settings.port ?? 25575)
  const host = settings.host ?? '127.0.0.1'
  const password = String(settings.password ?? '')
  if (!password) throw new Error('rcon plugin: settings.password must not be empty (vanilla refuses too)')
  const handlers = blockCommands(serv)
  let queue = Promise.resolve() // one command at a time, in arrival order, like vanilla's RCON thread

  async function run (line) {
    const text = line.startsWith('/') ? line.slice(1) : line
    const [name, ...args] = text.trim().split(/\s+/)
    const handler = handlers[name]
    if (handler) return handler(args)
    try {
      const output = await serv.commands.use(text, {}, true)
      return output === undefined ? `Unknown or incomplete command: ${text}` : output
    } catch (err) {
      return err && err.userError ? err.message : `Error: ${err && err.message}`
    }
  }

  function reply (socket, id, body) {
    const bytes = Buffer.from(body, 'utf8') // split by bytes, as vanilla does
    let offset = 0
    do {
      socket.write(encodePacket(id, RESPONSE_VALUE, bytes.subarray(offset, offset + MAX_REPLY_BODY)))
      offset += MAX_REPLY_BODY
    } while (offset < bytes.length)
  }

  const server = net.createServer(socket => {
    socket.setNoDelay(true)
    let authed = false
    let pending = Buffer.alloc(0)
    socket.on('error', () => socket.destroy())
    socket.on('data', chunk => {
      pending = Buffer.concat([pending, chunk])
      while (pending.length >= 4) {
        const length = pending.readInt32LE(0)
        if (length < 10 || length > MAX_REQUEST) { socket.destroy(); return }
        if (pending.length < 4 + length) break
        const id = pending.readInt32LE(4)
        const type = pending.readInt32LE(8)
        const body = pending.slice(12, 4 + length - 2).toString('utf8')
        pending = pending.slice(4 + length)
        if (type === AUTH) {
          authed = body === password
          socket.write(encodePacket(authed ? id : -1, AUTH_RESPONSE, ''))
        } else if (!authed) {
          socket.write(encodePacket(-1, AUTH_RESPONSE, ''))
        } else if (type === EXEC) {
          queue = queue.then(() => run(body)).then(
            out => reply(socket, id, out || ''),
            err => reply(socket, id, `Error: ${err && err.message}`))
        } else {
          const unknown = `Unknown request ${type.toString(16)}`
          queue = queue.then(() => reply(socket, id, unknown))
        }
      }
    })
  })
  server.on('error', err => { serv.emit('error', err) })
  server.listen(port, host, () => {
    serv.info?.(`[rcon] listening on ${host}:${server.address().port}`)
    console.log(`RCON ready on ${host}:${server.address().port}`)
  })
  serv.rconServer = server
}
