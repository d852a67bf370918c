// Applies a stored colour theme before the first paint (a classic, blocking script, so the
// page never flashes the wrong theme). Without a stored choice the system setting rules.
(function () {
  try {
    var theme = localStorage.getItem("curriculum.theme");
    if (theme === "light" || theme === "dark") document.documentElement.dataset.theme = theme;
  } catch (e) {
    // Storage can be blocked; the system theme still applies.
  }
})();
