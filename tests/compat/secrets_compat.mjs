// The real `e2b` SDK (pinned in package.json) and space's secrets (issue 10): the Secret class
// (create, getInfo by id and by name, list with paging, update, exists, destroy), and
// network.rules header transforms at Sandbox.create and in updateNetwork: a placeholder
// (Secret.fill) names the secret, a literal becomes a secret of the sandbox; getInfo echoes
// the rules with placeholders only, never a value. The values never reach the guest: its
// environment and the files it writes (/etc /home /root /tmp /run /var) are searched for
// them (the whole disk and RAM: tests/egress/test_credentials.py).
// Prints "ok <name>" per check; the first failure throws and exits non-zero.
import assert from 'node:assert/strict'
import { Sandbox, Secret, SecretNotFoundError } from 'e2b'

const ok = (name) => console.log(`ok ${name}`)
const tag = Math.random().toString(16).slice(2, 10)
const name = `gh-${tag}`
const value = `ghp_${tag}${'x'.repeat(24)}`
const literal = `lit_${tag}${'y'.repeat(24)}`

const info = await Secret.create(name, value, { metadata: { team: 'a' } })
assert.equal(info.name, name)
assert.equal(info.version, 1)
assert.deepEqual(info.metadata, { team: 'a' })
assert.ok(info.secretId && info.createdAt instanceof Date)
assert.ok(!JSON.stringify(info).includes(value))
ok('Secret.create')

assert.equal((await Secret.getInfo(info.secretId)).name, name)
assert.equal((await Secret.getInfo(name)).secretId, info.secretId)
assert.equal(await Secret.exists(name), true)
assert.equal(await Secret.exists(`nope-${tag}`), false)
await assert.rejects(Secret.getInfo(`nope-${tag}`), SecretNotFoundError)
ok('Secret.getInfo by id and by name; exists')

const extra = []
for (let i = 0; i < 3; i++) extra.push((await Secret.create(`${name}-p${i}`, `v${i}`)).name)
const seen = []
const pages = Secret.list({ limit: 2 })
let n = 0
while (pages.hasNext) {
  const items = await pages.nextItems()
  assert.ok(items.length <= 2)
  seen.push(...items.map((s) => s.name))
  n++
}
for (const s of [name, ...extra]) assert.ok(seen.includes(s), s)
assert.ok(n >= 2)
ok('Secret.list pages')

const updated = await Secret.update(name, `${value}2`)
assert.equal(updated.version, 2)
await assert.rejects(Secret.update(`nope-${tag}`, 'v'), SecretNotFoundError)
await assert.rejects(Secret.create(name, 'again'), /409|exists/)
await assert.rejects(Secret.create(`bad.name-${tag}`, 'v'), /400/)
await assert.rejects(Secret.create(`big-${tag}`, 'z'.repeat(16385)), /413/)
ok('Secret.update; bad input refused')

const host = 'api.example.test'
const sbx = await Sandbox.create('base', {
  allowInternetAccess: false,
  network: {
    allowOut: [host],
    rules: { [host]: [{ transform: { headers: { Authorization: `Bearer ${Secret.fill(name)}` } } },
                      { transform: { headers: { 'X-Api-Key': literal } } }] },
  },
})
try {
  let got = await sbx.getInfo()
  const rules = got.network.rules[host]
  assert.equal(rules[0].transform.headers.Authorization, `Bearer \${e2b.secrets.${name}}`)
  const shown = rules[1].transform.headers['X-Api-Key']
  assert.match(shown, new RegExp(`^\\$\\{e2b\\.secrets\\._${sbx.sandboxId}_[0-9a-f]{8}\\}$`))
  assert.ok(!JSON.stringify(got).includes(literal) && !JSON.stringify(got).includes(value))
  ok('Sandbox.create with network.rules; getInfo echoes placeholders only')

  // The guest never holds them: not in its environment, not in any file it can read.
  const env = await sbx.commands.run('env')
  for (const v of [value, `${value}2`, literal]) assert.ok(!env.stdout.includes(v))
  const grep = await sbx.commands.run(
    `grep -rlF -e '${literal}' -e '${value}' /etc /home /root /tmp /run /var 2>/dev/null; true`,
    { timeoutMs: 120000 })
  assert.equal(grep.stdout.trim(), '')
  ok('the values are not in the guest')

  await sbx.updateNetwork({
    allowOut: [host],
    rules: { [host]: [{ transform: { headers: { 'X-Other': Secret.fill(`${name}-p0`) } } }] },
  })
  got = await sbx.getInfo()
  assert.deepEqual(got.network.rules, {
    [host]: [{ transform: { headers: { 'X-Other': `\${e2b.secrets.${name}-p0}` } } }],
  })
  await assert.rejects(sbx.updateNetwork({
    allowOut: [host],
    rules: { [host]: [{ transform: { headers: { 'X-Other': Secret.fill(`nope-${tag}`) } } }] },
  }), /400/)
  await assert.rejects(sbx.updateNetwork({
    allowOut: [host], rules: { [host]: [{ transform: { headers: { 'Bad Header': 'v' } } }] },
  }), /400/)
  ok('updateNetwork replaces the rules; a missing secret or a bad header is refused')
} finally {
  await sbx.kill()
}

for (const s of [name, ...extra]) assert.equal(await Secret.destroy(s), true)
assert.equal(await Secret.destroy(name), false)
ok('Secret.destroy')
console.log('ok all')
