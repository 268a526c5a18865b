# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
name: role_file
short_description: Absolute path of a file in one of this collection's roles
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - Returns the absolute path on the controller of a file shipped in a role of C(gpufleet.nodeprep), such as a
    template or a script, whatever task the lookup runs in.
  - A role's variables use it so that the same variable (for example the checksum of the unit file the role would
    write) gives the same value inside the role and in the first play of C(gpufleet.nodeprep.site), which decides
    for every role outside the roles. Relative lookups such as C(lookup('ansible.builtin.template', 'x.j2')) only
    find a role's files from that role's own tasks.
  - Fails naming the term when it leaves the roles directory or names no file.
options:
  _terms:
    description: Paths C(<role>/<path in the role>), for example C(nccl/templates/torch-nccl.sh.j2).
    required: true
    type: list
    elements: str
seealso:
  - plugin: ansible.builtin.template
    plugin_type: lookup
"""

EXAMPLES = r"""
- name: Checksum of what the nccl role would write for the PyTorch variables
  ansible.builtin.debug:
    msg: >-
      {{ lookup('ansible.builtin.template', lookup('gpufleet.nodeprep.role_file', 'nccl/templates/torch-nccl.sh.j2'))
         | hash('sha1') }}
"""

RETURN = r"""
_raw:
  description: One absolute path per term.
  type: list
  elements: path
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils._collection import role_file


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        paths = []
        for term in terms:
            try:
                paths.append(role_file(str(term)))
            except ValueError as exc:
                raise AnsibleLookupError(str(exc))
        return paths
