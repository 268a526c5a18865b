# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""roles/nvidia_driver/tasks/work.yml: NVIDIA's apt key is on the node before anything refreshes the apt lists.

The apt source the role writes names its keyring (Signed-By). On the simulated fleet (a fresh Ubuntu 24.04 node,
`nodeprep_nvidia_driver_source: nvidia`, the nvidia_driver playbook alone) the devel tree's apt refresh ran after the
source was written and before the key was fetched, and apt refused the source: "The following signatures couldn't be
verified because the public key is not available ... The repository 'file:/srv/testbed-repos/apt/cuda  InRelease' is
not signed."
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import yaml

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import ROOT

WORK = os.path.join(ROOT, 'roles', 'nvidia_driver', 'tasks', 'work.yml')
FETCH = "Fetch NVIDIA's repository signing key (apt) or its runfile"
FILES = "Write the driver's files"
FOLDERS = "Create the driver's folders"


def flat_tasks(tasks):
    """The tasks of a task list in the order they run (blocks flattened)."""
    for task in tasks:
        yield task
        for key in ('block', 'rescue', 'always'):
            if isinstance(task.get(key), list):
                yield from flat_tasks(task[key])


def refreshes_apt(task):
    """An apt refresh of the role, or the kernel role's devel task (it refreshes the apt lists first)."""
    apt = task.get('ansible.builtin.apt')
    include = task.get('ansible.builtin.include_role')
    return bool((isinstance(apt, dict) and apt.get('update_cache')) or
                (isinstance(include, dict) and include.get('tasks_from') == 'devel.yml'))


def test_the_key_is_fetched_before_the_apt_lists_are_refreshed():
    with open(WORK) as handle:
        tasks = list(flat_tasks(yaml.safe_load(handle)))
    names = [task.get('name') for task in tasks]
    fetch = names.index(FETCH)
    # The runfile's folder first, then the key, then the apt source that names the key.
    assert names.index(FOLDERS) < fetch < names.index(FILES)
    refreshes = [i for i, task in enumerate(tasks) if refreshes_apt(task)]
    assert len(refreshes) == 2 and min(refreshes) > fetch
