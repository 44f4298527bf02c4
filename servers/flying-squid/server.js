// Starts flying-squid for rlbridge: offline, on 127.0.0.1 only, superflat, no world saved, with
// the RCON plugin. Environment: MC_PORT (25565), RCON_PORT (25575), RCON_PASSWORD (required),
// MC_VERSION (1.21.4), EXIT_WITH_PARENT (0).
'use strict'

const path = require('path')
const mcServer = require('flying-squid')

const password = process.env.RCON_PASSWORD
if (!password) {
  console.error('RCON_PASSWORD must be set')
  process.exit(2)
}

const serv = mcServer.createMCServer({
  motd: 'rlbridge test server',
  host: '127.0.0.1',
  port: Number(process.env.MC_PORT || 25565),
  'max-players': 2,
  'online-mode': false,
  logging: false,
  gameMode: 1,
  difficulty: 0,
  worldFolder: undefined,
  generation: { name: 'superflat', options: { worldHeight: 80 } },
  kickTimeout: 10000,
  plugins: {
    [path.join(__dirname, 'rcon-plugin.js')]: {
      host: '127.0.0.1',
      port: Number(process.env.RCON_PORT || 25575),
      password
    }
  },
  modpe: false,
  'view-distance': 2,
  'everybody-op': false,
  'max-entities': 10,
  'player-list-text': { header: { text: 'rlbridge' }, footer: { text: 'test server' } },
  version: process.env.MC_VERSION || '1.21.4'
})

serv.on('error', err => console.error('server error:', err && err.message))
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => process.exit(0))

// With EXIT_WITH_PARENT=1 (set by rlbridge's test and bench helper) the server stops when the
// process that started it dies without stopping it (a killed test run leaves no server behind).
if (process.env.EXIT_WITH_PARENT === '1') {
  const parent = process.ppid
  setInterval(() => { if (process.ppid !== parent) process.exit(0) }, 500).unref()
}
