// The real `e2b` SDK through the ingress, for issue 8 point 5: envd requests
// share kept-alive connections (undici's pool), and a sandbox killed while a
// Connect server stream is open makes that stream fail, never end cleanly.
// Configuration as in compat.mjs (E2B_* from the environment).
// Prints "ok <name>" per check; the first failure throws and exits non-zero.
import assert from 'node:assert/strict'
import net from 'node:net'
import { Sandbox } from 'e2b'

const ok = (name) => console.log(`ok ${name}`)

// Counts TCP connections made to the ingress while fn runs.
async function countConnections(fn) {
  const ingress = new URL(process.env.E2B_SANDBOX_URL)
  const port = Number(ingress.port)
  let n = 0
  const orig = net.Socket.prototype.connect
  net.Socket.prototype.connect = function (...args) {
    // net.connect() passes its normalized [options, callback] as one array.
    const o = Array.isArray(args[0]) ? args[0][0] : args[0]
    if (o && typeof o === 'object' && Number(o.port) === port) n++
    return orig.apply(this, args)
  }
  try {
    await fn()
  } finally {
    net.Socket.prototype.connect = orig
  }
  return n
}

const sbx = await Sandbox.create('base', { timeoutMs: 120_000 })
ok('create')
let killed = false
try {
  const runs = 10
  const conns = await countConnections(async () => {
    for (let i = 0; i < runs; i++) {
      const r = await sbx.commands.run(`echo ${i}`)
      assert.equal(r.stdout, `${i}\n`)
      assert.equal(await sbx.files.exists('/etc/hostname'), true)
    }
  })
  console.log(`${2 * runs} envd requests used ${conns} connection(s)`)
  assert.ok(conns >= 1, 'no connection to the ingress was seen: the count is broken')
  assert.ok(conns < runs, `expected connection reuse, got ${conns} connections`)
  ok('keep-alive')

  // A stream open when the sandbox dies: wait() must reject, not resolve.
  const h = await sbx.commands.run('echo started; sleep 600', { background: true })
  const deadline = Date.now() + 30_000
  while (!h.stdout.includes('started') && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100))
  }
  assert.ok(h.stdout.includes('started'))
  const waiting = h.wait().then(
    (res) => ({ resolved: res }),
    (err) => ({ rejected: err }),
  )
  await Sandbox.kill(sbx.sandboxId)
  killed = true
  const outcome = await Promise.race([
    waiting,
    new Promise((r) => setTimeout(() => r({ hung: true }), 30_000)),
  ])
  assert.ok(!outcome.hung, 'the stream hung after the kill')
  assert.ok(outcome.rejected, `the stream ended cleanly: ${JSON.stringify(outcome.resolved)}`)
  console.log(`stream error after kill: ${outcome.rejected.name}: ${outcome.rejected.message}`)
  ok('killed sandbox fails its stream')
} finally {
  if (!killed) await sbx.kill()
}
