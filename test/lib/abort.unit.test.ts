import { childAbort } from '../../src/lib/abort';

describe('childAbort', () => {
  it('aborts with the parent, with the parent reason', () => {
    const parent = new AbortController();
    const child = childAbort(parent.signal);
    parent.abort(new Error('stream stopped'));
    expect(child.signal.aborted).toBe(true);
    expect((child.signal.reason as Error).message).toBe('stream stopped');
  });

  it('aborts on its own without aborting the parent', () => {
    const parent = new AbortController();
    const child = childAbort(parent.signal);
    child.abort(new Error('deadline'));
    expect((child.signal.reason as Error).message).toBe('deadline');
    expect(parent.signal.aborted).toBe(false);
  });

  it('starts aborted under an aborted parent', () => {
    const parent = new AbortController();
    parent.abort('gone');
    expect(childAbort(parent.signal).signal.reason).toBe('gone');
  });

  it('stops following the parent once done, leaving no listener on it', () => {
    const parent = new AbortController();
    const added = jest.spyOn(parent.signal, 'addEventListener');
    const removed = jest.spyOn(parent.signal, 'removeEventListener');
    const child = childAbort(parent.signal);
    child.done();
    expect(removed).toHaveBeenCalledWith('abort', added.mock.calls[0]![1]);
    parent.abort();
    expect(child.signal.aborted).toBe(false);
  });
});
