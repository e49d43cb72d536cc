/**
 * Jest environment for test files that create @roamhq/wrtc video objects or load
 * @livekit/rtc-node. Select it per file with the docblock
 * `@jest-environment ./test/media-environment.js`.
 *
 * - A process that has had wrtc video objects can segfault when it exits naturally, so the
 *   process running the file (jest's main process in-band, or a worker) ends with an explicit
 *   process.exit() once its event loop is empty. It must be registered here: test code only sees
 *   jest's copy of `process`.
 * - rtc-node logs at debug level unless NODE_ENV=production when it is loaded.
 */
const { TestEnvironment } = require('jest-environment-node');

function exitBeforeNativeTeardown() {
  process.exit();
}

class MediaEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    if (!process.listeners('beforeExit').includes(exitBeforeNativeTeardown)) {
      process.on('beforeExit', exitBeforeNativeTeardown);
    }
    this.global.process.env.NODE_ENV = 'production';
  }
}

module.exports = MediaEnvironment;
