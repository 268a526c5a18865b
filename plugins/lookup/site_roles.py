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
    roles again.
  - With O(planned=true), only the roles whose decisions are made by M(gpufleet.nodeprep.node_plan); with
    O(planned=false), only the others.
options:
  planned:
    description: V(true) for the roles that plan with M(gpufleet.nodeprep.node_plan), V(false) for the others; all when
      not given.
    type: bool
seealso:
  - module: gpufleet.nodeprep.node_plan
"""

EXAMPLES = r"""
- name: List the roles site.yml runs
  ansible.builtin.debug:
    msg: "{{ lookup('gpufleet.nodeprep.site_roles', wantlist=true) }}"
"""

RETURN = r"""
_raw:
  description: Role names (short), in site.yml's order.
  type: list
  elements: str
"""

from ansible.plugins.lookup import LookupBase

from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils._plans import RULES, SITE_ROLES


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        planned = self.get_option('planned')
        return [role for role in SITE_ROLES if planned is None or (role in RULES) == bool(planned)]
