// The graphile-worker peer of `python -m benchmarks.run`: one worker process of its published
// performance method (no-op jobs, 24 concurrent jobs per process, a local queue of 500 jobs
// per fetch, batched completion), run against the benchmark's own PostgreSQL.
//
//   node peer.js migrate          install graphile-worker's schema in $DATABASE_URL
//   node peer.js work             run the queue until it is empty (runOnce), then print
//                                 {"first_ms", "last_ms", "jobs"} on stdout and stay alive
//                                 until SIGTERM, so the harness can read its CPU from /proc
//   node peer.js serve N          a worker as graphile-worker runs by default (N concurrent
//                                 jobs, one job fetched and completed per query), taking the
//                                 `noop` jobs clients add one at a time
//                                 (benchmarks/executor_path.py); on SIGTERM it stops
//                                 gracefully and prints {"first_ms", "last_ms", "jobs"}
//
// The harness (benchmarks/peer.py) queues the jobs with graphile-worker's own add_job.
"use strict";

const { runMigrations, runOnce } = require("graphile-worker");

const CONCURRENCY = 24;

function preset() {
  return {
    worker: {
      connectionString: process.env.DATABASE_URL,
      concurrentJobs: CONCURRENCY,
      maxPoolSize: CONCURRENCY + 1,
      localQueue: { size: 500, refetchDelay: { durationMs: 10 } },
      completeJobBatchDelay: 0,
      failJobBatchDelay: 0,
    },
  };
}

const silent = () => () => {};

async function work() {
  const { Logger } = require("graphile-worker");
  let first = null;
  let last = null;
  let jobs = 0;
  const taskList = {
    // The published method's no-op task (it logs payload id 999 only; we log nothing).
    log_if_999: async () => {
      const now = Date.now();
      if (first === null) {
        first = now;
        process.stdout.write("first\n");
      }
      jobs += 1;
      last = Date.now();
    },
  };
  await runOnce({ preset: preset(), logger: new Logger(silent) }, taskList);
  process.stdout.write(JSON.stringify({ first_ms: first, last_ms: last, jobs }) + "\n");
  // Stay alive (idle) until the harness has read this process's CPU.
  const keepAlive = setInterval(() => {}, 1 << 30);
  process.on("SIGTERM", () => {
    clearInterval(keepAlive);
    process.exit(0);
  });
}

async function serve(concurrency) {
  const { Logger, run } = require("graphile-worker");
  let first = null;
  let last = null;
  let jobs = 0;
  const taskList = {
    noop: async () => {
      const now = Date.now();
      if (first === null) {
        first = now;
        process.stdout.write("first\n");
      }
      jobs += 1;
      last = now;
    },
  };
  const runner = await run(
    {
      preset: {
        worker: {
          connectionString: process.env.DATABASE_URL,
          concurrentJobs: concurrency,
          maxPoolSize: concurrency + 1,
        },
      },
      logger: new Logger(silent),
    },
    taskList,
  );
  process.stdout.write("ready\n");
  process.on("SIGTERM", async () => {
    await runner.stop();
    process.stdout.write(JSON.stringify({ first_ms: first, last_ms: last, jobs }) + "\n");
    process.exit(0);
  });
  await runner.promise;
}

async function main(mode) {
  if (mode === "migrate") {
    await runMigrations({ preset: preset() });
  } else if (mode === "work") {
    await work();
  } else if (mode === "serve") {
    await serve(Number(process.argv[3] ?? 4));
  } else {
    throw new Error(`unknown mode ${mode}: use migrate, work or serve`);
  }
}

main(process.argv[2]).catch((error) => {
  console.error(error);
  process.exit(1);
});
