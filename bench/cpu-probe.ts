/**
 * Preloaded into each proxy the passthrough bench measures (`node -r dist-bench/bench/cpu-probe.js …`,
 * spawned with an IPC channel): every IPC message is answered with the process's CPU time so far
 * (`process.cpuUsage()`, user+system µs over all its threads), finer than /proc's 10 ms ticks.
 * Does nothing without an IPC channel, and never keeps the process alive.
 */
if (process.send) {
  process.on('message', () => {
    const c = process.cpuUsage();
    process.send!(c.user + c.system);
  });
  process.channel?.unref();
}

export {};
