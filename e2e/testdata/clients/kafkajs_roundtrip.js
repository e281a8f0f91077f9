// Round trip through a broker with kafkajs: create a topic, produce keyed records with a header
// (idempotent producer, gzip, acks=all), consume them back in a consumer group, and print "OK <n>".
// Environment: BOOTSTRAP, TOPIC, GROUP, COUNT; NODE_PATH points at the installed kafkajs.
const { Kafka, CompressionTypes, logLevel } = require('kafkajs')

const { BOOTSTRAP, TOPIC, GROUP } = process.env
const COUNT = Number(process.env.COUNT)
const kafka = new Kafka({ brokers: [BOOTSTRAP], logLevel: logLevel.ERROR })

async function main () {
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic: TOPIC, numPartitions: 3 }], waitForLeaders: true })

  const producer = kafka.producer({ idempotent: true })
  await producer.connect()
  for (let i = 0; i < COUNT; i += 100) {
    const messages = []
    for (let j = i; j < Math.min(i + 100, COUNT); j++) {
      messages.push({ key: `k${j}`, value: `v${j}`, headers: { h: `${j}` } })
    }
    await producer.send({ topic: TOPIC, acks: -1, compression: CompressionTypes.GZIP, messages })
  }
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: GROUP })
  await consumer.connect()
  await consumer.subscribe({ topic: TOPIC, fromBeginning: true })
  const seen = new Set()
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`consumed ${seen.size} of ${COUNT}`)), 30000)
    consumer.run({
      eachMessage: async ({ message }) => {
        const i = Number(message.key.toString().slice(1))
        if (message.value.toString() !== `v${i}` || message.headers.h.toString() !== `${i}`) {
          reject(new Error(`bad record ${message.key}`))
        }
        seen.add(i)
        if (seen.size === COUNT) {
          clearTimeout(timer)
          resolve()
        }
      }
    })
  })
  await consumer.disconnect()
  const offsets = await admin.fetchOffsets({ groupId: GROUP, topics: [TOPIC] })
  const committed = offsets[0].partitions.reduce((sum, p) => sum + Number(p.offset), 0)
  await admin.disconnect()
  if (committed !== COUNT) throw new Error(`committed ${committed}, want ${COUNT}`)
  console.log(`OK ${seen.size}`)
}

main().catch(err => { console.error('FAIL', err); process.exit(1) })
