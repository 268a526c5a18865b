# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Judge a galaxy-importer log: fail on any ERROR, and on any WARNING not allowed by the allow file.

Usage: importer_check.py IMPORTER_LOG ALLOWED_WARNINGS_FILE

The allow file holds one regular expression a line (blank lines and # comments skipped); each allowed warning is
explained in docs/development.md. An allow line that matches no warning fails too, so the list cannot go stale.
"""
import re
import sys


def main(log_path, allow_path):
    with open(allow_path) as handle:
        allowed = [line.strip() for line in handle if line.strip() and not line.lstrip().startswith('#')]
    with open(log_path) as handle:
        lines = [line.rstrip('\n') for line in handle]
    problems, used = [], set()
    if not any('Importer processing completed successfully' in line for line in lines):
        problems.append('galaxy-importer did not complete (no "Importer processing completed successfully")')
    for line in lines:
        if re.match(r'^\s*(ERROR|CRITICAL)\b', line) or 'Traceback' in line:
            problems.append(line)
        elif re.match(r'^\s*WARNING\b', line):
            hits = [pattern for pattern in allowed if re.search(pattern, line)]
            if hits:
                used.update(hits)
            else:
                problems.append(line)
    problems += ['allowed warning never seen (drop it from %s): %s' % (allow_path, pattern)
                 for pattern in allowed if pattern not in used]
    for problem in problems:
        print('FAIL ' + problem)
    if not problems:
        print('ok  galaxy-importer: no error, %d warning line(s), all explained' % sum(
            1 for line in lines if re.match(r'^\s*WARNING\b', line)))
    return 1 if problems else 0


if __name__ == '__main__':
    if len(sys.argv) != 3:
        sys.exit('usage: importer_check.py IMPORTER_LOG ALLOWED_WARNINGS_FILE')
    sys.exit(main(sys.argv[1], sys.argv[2]))
