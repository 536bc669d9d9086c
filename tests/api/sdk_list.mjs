// The real e2b SDK's Sandbox.list() against space (tests/api/test_list.py runs it):
// newest first by default, `order`, pagination in that order, startedAfter and template.
// argv: the run's metadata tag, then the sandbox ids oldest first.
import assert from 'node:assert/strict'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
const { Sandbox } = await import(path.join(here, '../compat/node_modules/e2b/dist/index.mjs'))

const [tag, ...ids] = process.argv.slice(2)
const newestFirst = [...ids].reverse()

async function all(opts) {
  const pager = Sandbox.list({ ...opts, query: { metadata: { suite: tag }, ...opts.query } })
  const seen = []
  let pages = 0
  while (pager.hasNext) {
    seen.push(...(await pager.nextItems()).map((s) => s.sandboxId))
    pages++
  }
  return { seen, pages }
}

assert.deepEqual((await all({})).seen, newestFirst)
console.log('ok default newest first')
assert.deepEqual((await all({ order: 'desc', limit: 1 })), { seen: newestFirst, pages: ids.length })
console.log('ok pages of one, newest first')
assert.deepEqual((await all({ order: 'asc', limit: 2 })).seen, ids)
console.log('ok order asc, pages of two')
assert.deepEqual((await all({ query: { startedAfter: new Date(Date.now() + 86400e3) } })).seen, [])
assert.deepEqual((await all({ query: { startedAfter: new Date(0) } })).seen, newestFirst)
console.log('ok startedAfter')
assert.deepEqual((await all({ query: { template: 'base' } })).seen, newestFirst)
assert.deepEqual((await all({ query: { template: 'no-such-template' } })).seen, [])
console.log('ok template')
