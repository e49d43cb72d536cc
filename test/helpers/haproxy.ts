/** A real HAProxy in front of gateway replicas (src/bench/haproxy.ts, shared with the bench). */
export { SERVED_BY, startHaproxy } from '../../src/bench/haproxy';
export type { Balancer, BalancerServer } from '../../src/bench/haproxy';
