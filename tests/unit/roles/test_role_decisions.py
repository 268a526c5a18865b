# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run the roles' decision tables (roles/<role>/tests/decisions.yml, and tests/unit/roles/site_reasons.yml: on which
nodes site.yml runs each settings role) as part of the unit tests.

Each table loads synthetic facts for many node states and asserts what the role decides (target kernel, packages,
reboot needed, refusals with their exact messages). They run on localhost, change nothing and need no GPU.
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re
import subprocess
import sys
import sysconfig

import pytest

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import ROOT, collection_parent

ROLES_WITH_TABLES = ['kernel']
TABLES = [os.path.join(ROOT, 'roles', role, 'tests', 'decisions.yml') for role in ROLES_WITH_TABLES] + [
    # Why playbooks/site.yml runs each settings role on a node (its first play's decision).
    os.path.join(ROOT, 'tests', 'unit', 'roles', 'site_reasons.yml'),
]


@pytest.mark.parametrize('playbook', TABLES, ids=lambda path: os.path.relpath(path, ROOT))
def test_decision_table(playbook):
    env = dict(os.environ,
               ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([collection_parent(), sysconfig.get_paths()['purelib']]),
               ANSIBLE_NOCOLOR='1', ANSIBLE_LOCALHOST_WARNING='false', ANSIBLE_INVENTORY_UNPARSED_WARNING='false')
    argv = [os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-i', 'localhost,', playbook,
            '-e', 'ansible_python_interpreter=' + sys.executable]
    proc = subprocess.run(argv, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:]
    recap = re.search(r'^localhost\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=0\s+failed=0', proc.stdout, re.M)
    assert recap, proc.stdout[-4000:]
    assert int(recap.group(1)) > 0
    assert recap.group(2) == '0', 'a decision table changed something: ' + proc.stdout[-4000:]
