// The banner that shows what went wrong (the broker's reason), never swallowed. An error is
// kept until what caused it succeeds: a refresh's until the next good refresh, an action's
// until the next action (a refresh in between does not wipe it).

let source = null;  // 'refresh' or 'action': what the banner shows an error of

export function showError(error, from = 'action') {
  const banner = document.getElementById('error');
  banner.textContent = error.reason ? `${error.error}: ${error.reason}`
                                    : String(error.message ?? error);
  banner.hidden = false;
  source = from;
}

// Clears the banner if it shows an error of `from` ('any': whatever it shows).
export function clearError(from = 'any') {
  if (from !== 'any' && from !== source) return;
  const banner = document.getElementById('error');
  banner.hidden = true;
  banner.textContent = '';
  source = null;
}

// Runs an operator's action: its errors go to the banner, and `done` follows success.
export async function act(action, done) {
  try {
    clearError();
    const result = await action();
    if (done) await done(result);
    return result;
  } catch (error) {
    showError(error, 'action');
    return undefined;
  }
}
