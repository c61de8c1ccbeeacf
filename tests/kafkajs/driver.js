#!/usr/bin/env node
// KafkaJS driver for tests/test_clients_kafkajs.py: reads a JSON scenario on stdin,
// runs its steps in order with one KafkaJS client, and prints one JSON document on
// stdout: {"results": [{"ok": true, "value": ...} | {"ok": false, "error": {...}}]}.
// The assertions stay in pytest; this only acts and reports. Bytes (keys, values,
// header values) travel as base64 both ways; KafkaJS's log goes to stderr.
//
// Scenario: {"client": {"brokers": [...], "ssl": {"ca": "/path"}, "sasl": {...}},
//            "steps": [{"op": "admin" | "produce" | "transaction" | "consume", ...}]}
// A step may carry "client" settings of its own (merged over the scenario's).
// A step that throws records the error (KafkaJS's class name, protocol error type,
// retriable, and its causes) and the next step still runs.
'use strict'

const fs = require('fs')
const { Kafka, logLevel, AssignerProtocol } = require('kafkajs')

const WAIT_MS = 60000 // the default limit of a consume step's wait for its records

const b64 = buf => (buf == null ? null : Buffer.from(buf).toString('base64'))
const unb64 = text => (text == null ? null : Buffer.from(text, 'base64'))
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

function stderrLogger() {
  return ({ namespace, level, label, log }) => {
    const { message, ...extra } = log
    process.stderr.write(`${label} [${namespace}] ${message} ${JSON.stringify(extra)}\n`)
  }
}

function clientConfig(client) {
  const config = {
    clientId: 'quill-kafkajs-tests',
    logLevel: logLevel.WARN,
    logCreator: stderrLogger,
    ...client,
  }
  if (client.ssl && client.ssl.ca) {
    config.ssl = { ...client.ssl, ca: [fs.readFileSync(client.ssl.ca)] }
  }
  return config
}

function describeError(error, depth = 0) {
  if (error == null || depth > 4) return null
  const out = {
    name: error.name,
    type: error.type || null,
    code: error.code === undefined ? null : error.code,
    message: String(error.message),
    retriable: error.retriable === undefined ? null : error.retriable,
  }
  const cause = error.originalError || error.cause
  if (cause && cause !== error) out.cause = describeError(cause, depth + 1)
  if (Array.isArray(error.errors)) out.errors = error.errors.map(e => describeError(e, depth + 1))
  if (Array.isArray(error.groups)) {
    // KafkaJSDeleteGroupsError: each group's own error
    out.groups = error.groups.map(g => ({
      groupId: g.groupId,
      error: describeError(g.error, depth + 1),
    }))
  }
  return out
}

function encodeMessage(m) {
  const out = { key: unb64(m.key), value: unb64(m.value) }
  if (m.partition !== undefined) out.partition = m.partition
  if (m.headers) {
    // a header key may repeat: KafkaJS takes an array of values for it
    const value = v => (Array.isArray(v) ? v.map(unb64) : unb64(v))
    out.headers = Object.fromEntries(Object.entries(m.headers).map(([k, v]) => [k, value(v)]))
  }
  return out
}

function decodeHeaders(headers) {
  return Object.fromEntries(
    Object.entries(headers || {}).map(([k, v]) => [k, Array.isArray(v) ? v.map(b64) : b64(v)])
  )
}

function decodeAssignment(buffer) {
  if (!buffer || buffer.length === 0) return {}
  const decoded = AssignerProtocol.MemberAssignment.decode(buffer)
  return decoded ? decoded.assignment : {}
}

// Admin results as JSON; a group member's assignment decoded to {topic: [partitions]}.
function adminValue(method, value) {
  if (method !== 'describeGroups') return value
  for (const group of value.groups) {
    for (const member of group.members) {
      member.memberAssignment = decodeAssignment(member.memberAssignment)
      delete member.memberMetadata
    }
  }
  return value
}

async function adminStep(kafka, step) {
  const admin = kafka.admin()
  await admin.connect()
  try {
    return adminValue(step.method, await admin[step.method](...(step.args || [])))
  } finally {
    await admin.disconnect()
  }
}

async function produceStep(kafka, step) {
  const producer = kafka.producer(step.producer || {})
  await producer.connect()
  try {
    return await producer.send({
      topic: step.topic,
      acks: step.acks === undefined ? -1 : step.acks,
      compression: step.compression || 0,
      messages: step.messages.map(encodeMessage),
    })
  } finally {
    await producer.disconnect()
  }
}

// One transactional producer; each batch is sent in a transaction of its own, with the
// group offsets of its "sendOffsets" ({consumerGroupId, topics}) if any, and then
// committed or aborted ("end"). The value is each batch's record metadata.
async function transactionStep(kafka, step) {
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, ...step.producer })
  await producer.connect()
  try {
    const out = []
    for (const batch of step.batches) {
      const txn = await producer.transaction()
      try {
        const messages = batch.messages.map(encodeMessage)
        const metadata = await txn.send({ topic: step.topic, messages })
        // a consumer group's offsets in the transaction (AddOffsetsToTxn, TxnOffsetCommit)
        if (batch.sendOffsets) await txn.sendOffsets(batch.sendOffsets)
        await (batch.end === 'commit' ? txn.commit() : txn.abort())
        out.push({ end: batch.end, metadata })
      } catch (error) {
        await txn.abort().catch(() => {})
        throw error
      }
    }
    return out
  } finally {
    await producer.disconnect()
  }
}

// Consumers (all of "consumers", each a KafkaJS consumer config) subscribe to "topics"
// and run until they have read "count" records between them and every one has joined
// its group with an assignment that overlaps no other member's, or a consumer crashes,
// or "waitMs" passes. With "commit", each consumer then commits the offset after the
// last record it read of each partition; with "describe", the groups are described
// (admin.describeGroups) while the consumers are still in them. The value has each
// consumer's records, its last GROUP_JOIN (member id, assignment) and its crashes.
async function consumeStep(kafka, step) {
  const members = step.consumers.map(config => ({
    groupId: config.groupId,
    consumer: kafka.consumer({ maxWaitTimeInMs: 200, heartbeatInterval: 500, ...config }),
    records: [],
    joins: [],
    crashes: [],
  }))
  const total = () => members.reduce((n, m) => n + m.records.length, 0)
  const crashed = () => members.some(m => m.crashes.length > 0)
  const done = () => crashed() || (total() >= step.count && settled(members))
  for (const m of members) {
    const { consumer } = m
    consumer.on(consumer.events.GROUP_JOIN, ({ payload }) =>
      m.joins.push({ memberId: payload.memberId, assignment: payload.memberAssignment })
    )
    consumer.on(consumer.events.CRASH, ({ payload }) =>
      m.crashes.push({ restart: payload.restart, error: describeError(payload.error) })
    )
    await consumer.connect()
    await consumer.subscribe({ topics: step.topics, fromBeginning: step.fromBeginning !== false })
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ topic, partition, message }) => {
        m.records.push({
          topic,
          partition,
          offset: message.offset,
          key: b64(message.key),
          value: b64(message.value),
          headers: decodeHeaders(message.headers),
        })
      },
    })
  }
  const deadline = Date.now() + (step.waitMs || WAIT_MS)
  while (!done() && Date.now() < deadline) await sleep(50)
  let groups = null
  try {
    if (step.commit && !crashed()) await Promise.all(members.map(commitRead))
    if (step.describe) {
      const groupIds = [...new Set(members.map(m => m.groupId))]
      groups = (await adminStep(kafka, { method: 'describeGroups', args: [groupIds] })).groups
    }
  } finally {
    await Promise.all(members.map(m => m.consumer.disconnect()))
  }
  return {
    members: members.map(({ records, joins, crashes }) => ({
      records,
      join: joins.length ? joins[joins.length - 1] : null,
      joins: joins.length,
      crashes,
    })),
    groups,
  }
}

// Every member has joined, and no partition is in two last assignments of one group.
function settled(members) {
  const owned = new Set()
  for (const m of members) {
    const last = m.joins[m.joins.length - 1]
    if (!last) return false
    for (const [topic, partitions] of Object.entries(last.assignment)) {
      for (const partition of partitions) {
        const key = JSON.stringify([m.groupId, topic, partition])
        if (owned.has(key)) return false
        owned.add(key)
      }
    }
  }
  return true
}

async function commitRead(member) {
  const next = {}
  for (const r of member.records) {
    const key = `${r.topic}\u0000${r.partition}`
    const offset = BigInt(r.offset) + 1n
    if (!(key in next) || next[key].offset < offset) {
      next[key] = { topic: r.topic, partition: r.partition, offset }
    }
  }
  const offsets = Object.values(next).map(o => ({ ...o, offset: o.offset.toString() }))
  if (offsets.length) await member.consumer.commitOffsets(offsets)
}

const STEPS = {
  admin: adminStep,
  produce: produceStep,
  transaction: transactionStep,
  consume: consumeStep,
}

async function main() {
  const scenario = JSON.parse(fs.readFileSync(0, 'utf8'))
  const kafka = new Kafka(clientConfig(scenario.client))
  const results = []
  for (const step of scenario.steps) {
    // a step's own "client" settings (another user, say) give it a client of its own
    const client = step.client
      ? new Kafka(clientConfig({ ...scenario.client, ...step.client }))
      : kafka
    try {
      results.push({ ok: true, value: await STEPS[step.op](client, step) })
    } catch (error) {
      results.push({ ok: false, error: describeError(error) })
    }
  }
  // KafkaJS can leave timers behind a disconnect: exit once the report is written
  process.stdout.write(JSON.stringify({ results }) + '\n', () => process.exit(0))
}

main().catch(error => {
  process.stderr.write(`driver failed: ${error.stack}\n`)
  process.exit(2)
})
