# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The OS facts the kernel and nvidia_driver roles read (their decisions are the plans of gpufleet.nodeprep.node_plan:
plugins/module_utils/plans/_plan_kernel.py and plans/_plan_nvidia_driver.py)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._os_release import os_facts


def nodeprep_os_facts(facts):
    """_os_release.os_facts: the OS facts the kernel and nvidia_driver roles read (only the keys they need are read)."""
    if not isinstance(facts, dict):
        raise AnsibleFilterError('nodeprep_os_facts: the input must be ansible_facts (a dict), got {0}'.format(
            type(facts).__name__))
    return os_facts(facts)


class FilterModule(object):
    def filters(self):
        return {'nodeprep_os_facts': nodeprep_os_facts}
