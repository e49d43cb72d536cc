/**
 * Jest environment of the `unit` project (jest.config.js, test/README.md): a `*.unit.test.ts` file
 * opens no socket and starts no process. While such a file runs, listening, connecting, binding a
 * UDP socket and spawning a child process throw, naming the rule; teardown puts them back (a jest
 * worker runs integration files too).
 */
const childProcess = require('node:child_process');
const dgram = require('node:dgram');
const net = require('node:net');
const { TestEnvironment } = require('jest-environment-node');

const GUARDED = [
  [net.Server.prototype, 'listen', 'listens on a port'],
  [net.Socket.prototype, 'connect', 'opens a socket'],
  [dgram.Socket.prototype, 'bind', 'binds a UDP socket'],
  [childProcess.ChildProcess.prototype, 'spawn', 'starts a process'],
  [childProcess, 'spawnSync', 'starts a process'],
  [childProcess, 'execSync', 'starts a process'],
  [childProcess, 'execFileSync', 'starts a process'],
];

class UnitEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    this.testPath = context.testPath;
    this.originals = [];
  }

  async setup() {
    await super.setup();
    const file = this.testPath;
    for (const [target, name, what] of GUARDED) {
      const original = target[name];
      this.originals.push([target, name, original]);
      target[name] = function guarded() {
        throw new Error(
          `${file} ${what}: a *.unit.test.ts file opens no socket and starts no process; name it *.test.ts (the integration project, test/README.md)`,
        );
      };
    }
  }

  async teardown() {
    for (const [target, name, original] of this.originals.splice(0).reverse()) target[name] = original;
    await super.teardown();
  }
}

module.exports = UnitEnvironment;
