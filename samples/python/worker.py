"""worker.py: an asyncio job worker, to profile with coprof.

Each job is a JSON document: decode_payload parses it (CPU-bound), Rules.evaluate checks
it, and Repo.save stores it in a simulated database (an awaited asyncio.sleep). Under
COPROF_CLOCK=cpu decode_payload dominates; under COPROF_CLOCK=wall the database wait in
Repo.save does. Usage: worker.py [JOBS] [CONCURRENCY] [DB_SECONDS]
"""
import asyncio
import json
import sys


def make_job(i):
    items = [{"sku": "item-%d-%d" % (i, k), "qty": k % 7, "price": k * 1.25,
              "tags": ["a", "b", "c"][: k % 3 + 1]} for k in range(400)]
    return json.dumps({"order": i, "customer": "c%d" % (i % 97), "items": items})


def decode_payload(raw):
    doc = json.loads(raw)
    # A second pass, as a real decoder would validate and normalise.
    for item in doc["items"]:
        item["total"] = item["qty"] * item["price"]
    return doc


class Rules:
    def evaluate(self, doc):
        return doc["order"] >= 0 and len(doc["items"]) > 0


class Repo:
    def __init__(self, delay):
        self.delay = delay
        self.saved = 0

    async def save(self, doc):
        await asyncio.sleep(self.delay)  # the database round trip
        self.saved += 1


async def handle(raw, rules, repo):
    doc = decode_payload(raw)
    if rules.evaluate(doc):
        await repo.save(doc)


async def worker(queue, rules, repo):
    while True:
        raw = await queue.get()
        try:
            await handle(raw, rules, repo)
        finally:
            queue.task_done()


async def main(jobs, concurrency, delay):
    payloads = [make_job(i) for i in range(32)]
    queue = asyncio.Queue()
    rules, repo = Rules(), Repo(delay)
    workers = [asyncio.create_task(worker(queue, rules, repo), name="worker-%d" % k)
               for k in range(concurrency)]
    for i in range(jobs):
        queue.put_nowait(payloads[i % len(payloads)])
    await queue.join()
    for w in workers:
        w.cancel()
    await asyncio.gather(*workers, return_exceptions=True)
    print("saved %d jobs" % repo.saved)


if __name__ == "__main__":
    args = sys.argv[1:]
    asyncio.run(main(int(args[0]) if args else 200,
                     int(args[1]) if len(args) > 1 else 8,
                     float(args[2]) if len(args) > 2 else 0.05))
