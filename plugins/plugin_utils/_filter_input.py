# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE to the gpufleet.nodeprep collection; may change in any release.
#
# What the collection's action plugins do with their input before they hand it to the rules in plugins/module_utils: facts
# and role variables arrive as Ansible's own str/list/dict types (AnsibleUnicode, AnsibleSequence, lazy containers),
# the rules take plain ones.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.module_utils.common.collections import is_sequence


def plain(value):
    """``value`` with every string, dict and sequence in it made a plain str, dict and list."""
    if isinstance(value, str):
        return str(value)
    if isinstance(value, dict):
        return dict((plain(k), plain(v)) for k, v in value.items())
    if is_sequence(value):
        return [plain(v) for v in value]
    return value
