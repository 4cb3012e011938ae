// The sign-in page's only script: show the error flag the server redirected with.
if (new URLSearchParams(location.search).has("error")) {
  document.getElementById("login-error").hidden = false;
}
