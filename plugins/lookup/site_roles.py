# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
name: site_roles
short_description: The roles that C(gpufleet.nodeprep.site) runs, in its order
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - Returns the names of this collection's roles that configure a node, in the order C(gpufleet.nodeprep.site) runs
    them. This list has one home (the collection's planner); the playbooks read it from there instead of naming the
    roles again, so a new role is added in one place.
  - With O(stage), only the roles of one of C(gpufleet.nodeprep.site)'s two stages.
options:
  stage:
    description:
      - V(all) every role; V(disruptive) the roles of the batched play, which may reboot a node (C(kernel),
        C(nvidia_driver)); V(settings) the others, which run after them.
    type: str
    choices: [all, disruptive, settings]
    default: all
seealso:
  - module: gpufleet.nodeprep.node_plan
"""

EXAMPLES = r"""
- name: List the roles site.yml runs
  ansible.builtin.debug:
    msg: "{{ lookup('gpufleet.nodeprep.site_roles', wantlist=true) }}"

- name: Plan the settings roles again
  gpufleet.nodeprep.node_plan:
    roles: "{{ query('gpufleet.nodeprep.site_roles', stage='settings') }}"
"""

RETURN = r"""
_raw:
  description: Role names (short), in site.yml's order.
  type: list
  elements: str
"""

from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase

from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils._plans import STAGES


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        # Refused here, naming the allowed values, before Ansible's own check (whose words change between releases
        # and do not list them).
        stage = kwargs.get('stage', 'all')
        if stage not in STAGES:
            raise AnsibleError('gpufleet.nodeprep.site_roles: stage={0!r} is not one of {1}'.format(
                stage, ', '.join(sorted(STAGES))))
        self.set_options(var_options=variables, direct=kwargs)
        return list(STAGES[self.get_option('stage')])
