/** The seeded PRNG of replayable test runs (the chaos runner, fuzz cases): src/lib/prng.ts's mulberry32. */
export { seededRandom as prng } from '../../src/lib/prng';
