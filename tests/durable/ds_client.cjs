// A Durable Streams client (@durable-streams/client) for
// tests/durable_streams_cross.rs. Usage:
//   node ds_client.cjs create <url> <content-type>
//   node ds_client.cjs append <url> <message>...     (one append each)
//   node ds_client.cjs produce <url> <producer-id> <message>...  (IdempotentProducer)
//   node ds_client.cjs read <url>                     (prints the JSON messages)
// NODE_PATH must reach the installed client.
const { DurableStream, IdempotentProducer } = require("@durable-streams/client");

async function main() {
  const [cmd, url, ...rest] = process.argv.slice(2);
  if (cmd === "create") {
    await DurableStream.create({ url, contentType: rest[0] });
  } else if (cmd === "append") {
    const s = new DurableStream({ url, contentType: "application/json" });
    for (const m of rest) await s.append(m);
  } else if (cmd === "produce") {
    const s = new DurableStream({ url, contentType: "application/json" });
    const p = new IdempotentProducer(s, rest[0], { autoClaim: true });
    for (const m of rest.slice(1)) p.append(m);
    await p.flush();
    await p.close();
  } else if (cmd === "read") {
    const s = new DurableStream({ url, contentType: "application/json" });
    const res = await s.stream({ live: false });
    const items = await res.json();
    process.stdout.write(JSON.stringify(items) + "\n");
  } else {
    throw new Error(`unknown command ${cmd}`);
  }
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
