// An agent's turns with the official OpenAI JavaScript client against two
// front doors on one Temporal: each turn is a background response, polled
// with responses.retrieve on one front door until it is completed, and at
// once continued on the other with previous_response_id, while its
// input_items are listed, it is cancelled (a completed response is
// returned unchanged) and its message is named by an item_reference.
// Last, a response deleted as soon as it is completed is gone from both.
// Prints one JSON object with what the client saw; the Go test
// (../../stored_test.go) checks it.
//
//   node chain.mjs BASE_URL_A BASE_URL_B TOKEN USER TURNS
import OpenAI from "openai";

const [baseA, baseB, apiKey, user, turns] = process.argv.slice(2);
const doors = [baseA, baseB].map((baseURL) => new OpenAI({ baseURL, apiKey, maxRetries: 0 }));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const running = (r) => r.status === "queued" || r.status === "in_progress";
const turn = (i, prev) => ({
  model: "auto", background: true, user, instructions: "You are a support agent.",
  input: `Turn ${i}: where is my order? (chain)`, ...(prev ? { previous_response_id: prev } : {}),
});

const out = { turns: [], refusals: [] };
// refused runs f, noting what the front door answered instead.
const refused = (what) => (e) => {
  out.refusals.push({ what, status: e.status ?? null, code: e.code ?? null, message: e.message });
  return null;
};

let created = await doors[0].responses.create(turn(0, null));
for (let i = 0; created && i < Number(turns); i++) {
  const poller = doors[i % 2], other = doors[(i + 1) % 2];
  let r = created;
  for (let n = 0; running(r); n++) {
    if (n > 1000) throw new Error(`response ${r.id} never completed`);
    await sleep(20);
    r = await poller.responses.retrieve(r.id);
  }
  const seen = { id: r.id, status: r.status, text: r.output_text };
  // At once, on the other front door: what retrieve called completed is
  // completed for every endpoint.
  const next = i + 1 < Number(turns)
    ? other.responses.create(turn(i + 1, r.id)).catch(refused(`previous_response_id: turn ${i}`))
    : Promise.resolve(null);
  await Promise.all([
    other.responses.inputItems.list(r.id, { order: "asc" })
      .then((page) => { seen.input_items = page.data.map((it) => it.type); }, refused(`input_items of turn ${i}`)),
    other.responses.cancel(r.id)
      .then((c) => { seen.cancel_status = c.status; seen.cancel_text = c.output?.[0]?.content?.[0]?.text ?? null; }, refused(`cancel of turn ${i}`)),
    other.responses.create({
      model: "auto", user, input: [{ type: "item_reference", id: r.output[0].id },
        { role: "user", content: `What did you say in turn ${i}? (ref)` }],
    }).then((ref) => { seen.reference_status = ref.status; }, refused(`item_reference to turn ${i}`)),
  ]);
  out.turns.push(seen);
  created = await next;
}

// Deleted as soon as retrieve calls it completed: gone everywhere.
let r = await doors[0].responses.create(turn(Number(turns), null));
while (running(r)) {
  await sleep(20);
  r = await doors[0].responses.retrieve(r.id);
}
out.deleted = { id: r.id, status: r.status };
await doors[1].responses.delete(r.id).then(() => { out.deleted.deleted = true; }, refused("delete"));
out.deleted.after = [];
for (const door of doors) {
  await door.responses.retrieve(r.id).then((g) => out.deleted.after.push(g.status), (e) => out.deleted.after.push(e.status));
  await door.responses.create(turn(0, r.id)).then((g) => out.deleted.after.push(g.status), (e) => out.deleted.after.push(e.status));
}
console.log(JSON.stringify(out));
