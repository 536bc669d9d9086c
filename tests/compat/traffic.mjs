// The real `e2b` SDK with network.allowPublicTraffic: false (issue 7 item 7):
// Sandbox.create returns a trafficAccessToken, getInfo reports the setting,
// and a user port through the ingress (addressed by sbx.getHost(port), sent
// to the ingress' loopback address) answers 403 without the token and 200
// with it in e2b-traffic-access-token. Configuration as in compat.mjs.
// Prints "ok <name>" per check; the first failure throws and exits non-zero.
import assert from 'node:assert/strict'
import http from 'node:http'
import { Sandbox } from 'e2b'

const ok = (name) => console.log(`ok ${name}`)
const ingress = new URL(process.env.E2B_SANDBOX_URL)

function get(host, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: ingress.hostname, port: ingress.port, path: '/index.txt',
      headers: { Host: host, Connection: 'close', ...headers } }, (res) => {
      let body = ''
      res.on('data', (d) => { body += d })
      res.on('end', () => resolve({ status: res.statusCode, body }))
    })
    req.on('error', reject)
    req.end()
  })
}

const sbx = await Sandbox.create('base', { network: { allowPublicTraffic: false } })
try {
  assert.equal(typeof sbx.trafficAccessToken, 'string')
  assert.equal(sbx.trafficAccessToken.length, 32)
  ok('create returns a traffic access token')
  const info = await sbx.getInfo()
  assert.equal(info.network?.allowPublicTraffic, false)
  ok('getInfo reports allowPublicTraffic false')
  await sbx.commands.run('cd /tmp && echo hello >index.txt && ' +
    '(nohup python3 -m http.server 8000 --bind 0.0.0.0 >/dev/null 2>&1 &)')
  const host = sbx.getHost(8000)
  const token = { 'e2b-traffic-access-token': sbx.trafficAccessToken }
  let r
  for (let i = 0; i < 300; i++) {
    r = await get(host, token)
    if (r.status === 200) break
    await new Promise((res) => setTimeout(res, 200))
  }
  assert.equal(r.status, 200)
  assert.equal(r.body, 'hello\n')
  ok('user port answers with the token')
  r = await get(host)
  assert.equal(r.status, 403)
  assert.match(JSON.parse(r.body).message, /Token header 'e2b-traffic-access-token' is missing/)
  ok('user port refuses without the token')
  r = await get(host, { 'e2b-traffic-access-token': 'f'.repeat(32) })
  assert.equal(r.status, 403)
  ok('user port refuses a wrong token')
  // envd traffic (the SDK's own) needs no traffic token.
  assert.equal((await sbx.commands.run('echo envd')).stdout, 'envd\n')
  ok('envd works without the traffic token')
} finally {
  await sbx.kill()
}
