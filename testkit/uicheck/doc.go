// Package uicheck drives a real headless Chromium over the DevTools
// protocol, so tests can check what an operator sees in the Temporal Web UI:
// open a page, wait until given texts are rendered, click a control by its
// label, read the page text and take a full-page screenshot.
//
// Chromium is found on PATH (or through $CHROMIUM); tests that need it skip
// with a clear message when it is missing (see Chromium). The browser runs
// headless, without sandbox, GPU, background networking, component updates
// or sync, with a throw-away profile, and never leaves this machine unless
// the page asks it to.
package uicheck
