// The real `e2b` SDK in its default mode (issue 8 point 8): no E2B_SANDBOX_URL, so every envd
// call goes to https://49983-{id}.{E2B_DOMAIN} and getHost() names https://{port}-{id}.{domain},
// served by space-api's TLS ingress. Run by test_tls_default_mode.py inside a network
// namespace whose resolver answers *.{domain} with the ingress' address and whose client
// trusts the deployment CA (NODE_EXTRA_CA_CERTS).
// Prints "ok <name>" per check; the first failure throws and exits non-zero.
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'

const ok = (name) => console.log(`ok ${name}`)
const sleep = (ms) => new Promise((res) => setTimeout(res, ms))
const domain = process.env.E2B_DOMAIN

assert.equal(process.env.E2B_SANDBOX_URL, undefined, 'default mode: no E2B_SANDBOX_URL')

const sbx = await Sandbox.create('base', { timeoutMs: 180_000, secure: true })
ok('create (secure)')
try {
  const url = new URL(sbx.envdApiUrl)
  assert.equal(url.protocol, 'https:')
  assert.equal(url.host, `49983-${sbx.sandboxId}.${domain}`)
  ok('envd at https://49983-{id}.{domain}')

  const r = await sbx.commands.run('echo hello')
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'hello\n')
  ok('commands.run')

  await sbx.files.write('/home/user/tls.txt', 'over tls\n')
  assert.equal(await sbx.files.read('/home/user/tls.txt'), 'over tls\n')
  ok('files.write/read')

  // Signed URLs: plain fetch(), no headers, no token; only the signature authorizes.
  const down = await sbx.downloadUrl('/home/user/tls.txt')
  assert.ok(new URL(down).searchParams.get('signature'), down)
  assert.equal(new URL(down).host, `49983-${sbx.sandboxId}.${domain}`)
  let res = await fetch(down)
  assert.equal(res.status, 200)
  assert.equal(await res.text(), 'over tls\n')
  // A forged signature is refused by envd.
  const forged = new URL(down)
  forged.searchParams.set('signature', 'v1_' + 'A'.repeat(43))
  res = await fetch(forged)
  assert.ok(res.status === 401 || res.status === 403, `forged signature: ${res.status}`)
  await res.arrayBuffer()
  ok('downloadUrl (signed) by plain fetch')

  const up = await sbx.uploadUrl('/home/user/uploaded.txt')
  assert.ok(new URL(up).searchParams.get('signature'), up)
  const form = new FormData()
  form.append('file', new Blob(['uploaded by url\n']), 'uploaded.txt')
  res = await fetch(up, { method: 'POST', body: form })
  assert.equal(res.status, 200, await res.clone().text())
  await res.arrayBuffer()
  assert.equal(await sbx.files.read('/home/user/uploaded.txt'), 'uploaded by url\n')
  ok('uploadUrl (signed) by plain fetch')

  // getHost(): a server in the sandbox, reached at https://{port}-{id}.{domain}.
  await sbx.files.write('/home/user/www/index.txt', 'from the sandbox server\n')
  await sbx.commands.run('python3 -m http.server 8000 --directory /home/user/www',
    { background: true, timeoutMs: 0 })
  const host = sbx.getHost(8000)
  assert.equal(host, `8000-${sbx.sandboxId}.${domain}`)
  let body = ''
  for (let i = 0; i < 80 && !body; i++) {
    try {
      res = await fetch(`https://${host}/index.txt`)
      if (res.status === 200) body = await res.text()
      else await res.arrayBuffer()
    } catch (e) {}
    if (!body) await sleep(250)
  }
  assert.equal(body, 'from the sandbox server\n')
  ok('getHost(8000) over https')

  // Streaming output (a Connect server stream over TLS, kept-alive connections).
  const lines = []
  const s = await sbx.commands.run('for i in 1 2 3; do echo $i; sleep 0.2; done',
    { onStdout: (d) => lines.push(d) })
  assert.equal(s.stdout, '1\n2\n3\n')
  assert.ok(lines.length >= 1)
  ok('streamed command output')
} finally {
  assert.equal(await sbx.kill(), true)
}
ok('kill')
console.log('tls default mode passed')
