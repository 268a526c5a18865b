# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller-side plans: what the settings roles would change, decided from the facts gathered once.

Thin wrappers: every rule lives in plugins/module_utils (_node_state), which the modules use too.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.collections import is_sequence

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._node_records import NodeStateError, unit_name
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules._path_changes import path_changes
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils._filter_input import plain, plain_dict


def nodeprep_path_changes(files, wants):
    """Reasons why copy/template/file tasks for ``wants`` would change paths, from ansible_facts.nodeprep_files."""
    if not is_sequence(wants) or isinstance(wants, str):
        raise AnsibleFilterError('nodeprep_path_changes: wants must be a list of dicts with path and state, got '
                                 '{0!r}'.format(wants))
    wants = plain(wants)
    for want in wants:
        if not isinstance(want, dict) or not want.get('path'):
            raise AnsibleFilterError('nodeprep_path_changes: each want needs a path, got {0!r}'.format(want))
        if want.get('state', 'file') not in ('file', 'directory', 'link', 'absent'):
            raise AnsibleFilterError('nodeprep_path_changes: {0}: state {1!r} is not file, directory, link or '
                                     'absent'.format(want['path'], want.get('state')))
    return path_changes(plain_dict(files, 'nodeprep_path_changes', 'the input (ansible_facts.nodeprep_files)',
                                   none_is_empty=True), wants)


def nodeprep_unit_names(names):
    """The keys gpu_node_facts gives these units in nodeprep_units ('.service' added when there is no suffix)."""
    if not is_sequence(names) or isinstance(names, str):
        raise AnsibleFilterError('nodeprep_unit_names: input must be a list of unit names, got {0!r}'.format(names))
    try:
        return [unit_name(str(name)) for name in names]
    except NodeStateError as exc:
        raise AnsibleFilterError('nodeprep_unit_names: {0}'.format(exc))


class FilterModule(object):
    def filters(self):
        return {
            'nodeprep_path_changes': nodeprep_path_changes,
            'nodeprep_unit_names': nodeprep_unit_names,
        }
