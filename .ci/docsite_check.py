# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Judge the Sphinx warnings of the docsite build: only the ones caused by unreachable intersphinx inventories pass.

Usage: docsite_check.py SPHINX_WARNINGS_FILE

CI has no network beyond PyPI and a Debian mirror, so the intersphinx inventories of docs.python.org,
jinja.palletsprojects.com and docs.ansible.com cannot be fetched. That gives two kinds of warning, both accepted:
- "failed to reach any of the inventories" (and its indented detail lines);
- "undefined label" for labels that live in those inventories: Ansible's own docs (common_return_values, ...) and
  the pages of other collections (ansible_collections.<other>.*).
Every other warning fails, including an undefined label of this collection.
"""
import re
import sys

ANSIBLE_DOCS_LABELS = {
    'common_return_values', 'action_plugins', 'ansible_configuration_settings', 'playbooks_filters',
    'playbooks_tests', 'check_mode_dry', 'module_docs', 'playbooks_intro', 'collections',
}
OWN = 'ansible_collections.gpufleet.nodeprep.'


def accepted(line):
    if 'failed to reach any of the inventories' in line or line.startswith('intersphinx inventory '):
        return True
    match = re.search(r"undefined label: '([^']+)'", line)
    if match:
        label = match.group(1)
        return label in ANSIBLE_DOCS_LABELS or (label.startswith('ansible_collections.') and not label.startswith(OWN))
    return False


def main(path):
    with open(path) as handle:
        lines = [line.rstrip('\n') for line in handle if line.strip()]
    bad = [line for line in lines if not accepted(line)]
    for line in bad:
        print('FAIL ' + line)
    print('%s docsite: %d warning line(s), %d not caused by unreachable intersphinx inventories'
          % ('ok ' if not bad else 'FAIL', len(lines), len(bad)))
    return 1 if bad else 0


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit('usage: docsite_check.py SPHINX_WARNINGS_FILE')
    sys.exit(main(sys.argv[1]))
