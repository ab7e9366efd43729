// Progressive enhancement only: every page works without this file.
// The copy button appears only where the clipboard can be written.
for (const button of document.querySelectorAll('button[data-copy-target]')) {
  const field = document.getElementById(button.dataset.copyTarget);
  const status = button.closest('section')?.querySelector('.copy-status');
  if (!field) continue;
  button.hidden = false;
  button.addEventListener('click', async () => {
    field.select();
    try {
      await navigator.clipboard.writeText(field.value);
      if (status) status.textContent = 'Copied to the clipboard.';
    } catch {
      if (status)
        status.textContent = 'Copying failed: the text is selected, press Ctrl+C (or ⌘C) to copy it.';
    }
  });
}
